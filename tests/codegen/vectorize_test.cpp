// The element loops of the quantized models' pointwise kernels must vectorize. Whether GCC
// vectorizes a loop holding scalar::cast's saturating float -> int conversion depends on the
// cast's exact form and on what surrounds it (kernels/scalar.h): one rewrite of the cast, correct
// on every value, left the requantizing residual adds of ResNet-18 and MobileNetV2 scalar (3.5 ns
// per element instead of 0.9; ResNet-18 int8 4.3 -> 10.6 ms), which no value test could see.
// Here the generated kernel of each such group is compiled with the codegen's own compiler and
// flags plus -fopt-info-vec-optimized, and GCC is asked whether its element loop vectorized.
// Skipped where the kernel compiler is not GCC (the report is GCC's).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "codegen/compiler.h"
#include "codegen/emit_cpp.h"
#include "codegen/kernel_headers.h"
#include "codegen/lower.h"
#include "ir/printer.h"
#include "support/temp_dir.h"

namespace smelt::codegen {
namespace {

class Vectorize : public smelt::testing::TempDirTest {
 protected:
  // GCC's vectorizer report for the kernel of `graph_text` (an elementwise graph, lowered as a
  // fusion group's body), or "" with *skip set when there is no GCC to ask.
  std::string report(const std::string& graph_text, bool* skip) {
    const Compiler compiler = find_compiler();
    // (GCC's first line names the driver, "c++ (Debian 12.2.0-14) 12.2.0"; clang's says clang)
    *skip = !compiler.available() || compiler.version.find("clang") != std::string::npos;
    if (*skip) return "";
    auto graph = ir::parse(graph_text);
    const LowerResult lowered = lower(*graph, "probe");
    EXPECT_TRUE(lowered.kernel.has_value()) << lowered.reason;
    if (!lowered.kernel) return "";
    const std::string source = path("probe.cpp");
    std::ofstream(source) << emit_cpp(*lowered.kernel, "smelt_kernel_probe");
    const std::string include = write_kernel_headers(dir_);
    std::string command = compiler.path;
    for (const std::string& flag : compiler.flags) command += " " + flag;
    command += " -I" + include + " -fopt-info-vec-optimized -c " + source + " -o " + path("probe.o") + " 2>&1";
    std::string output;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buffer[4096];
      for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
      EXPECT_EQ(::pclose(pipe), 0) << command << "\n" << output;
    }
    return output;
  }
};

// A residual add between quantized tensors, requantized to uint8 after a rectifier (zero point
// 0: clamp to [0, 255], then the cast), as ResNet-18's blocks run it.
TEST_F(Vectorize, RectifiedQuantizedResidualAdd) {
  bool skip = false;
  const std::string out = report(R"(graph(%a: u8[4096], %b: u8[4096]) {
  %sa: f32[] = constant 0.02
  %zb: f32[] = constant 128.0
  %sb: f32[] = constant 0.03
  %sy: f32[] = constant 0.05
  %1: f32[4096] = cast(%a) {dtype=f32}
  %2: f32[4096] = mul(%1, %sa)
  %3: f32[4096] = cast(%b) {dtype=f32}
  %4: f32[4096] = sub(%3, %zb)
  %5: f32[4096] = mul(%4, %sb)
  %6: f32[4096] = add(%2, %5)
  %7: f32[4096] = div(%6, %sy)
  %8: f32[4096] = round(%7)
  %9: f32[4096] = clamp(%8) {min=0.0, max=255.0}
  %10: u8[4096] = cast(%9) {dtype=u8}
  return %10
})",
                                 &skip);
  if (skip) GTEST_SKIP() << "the kernel compiler is not GCC";
  EXPECT_NE(out.find("loop vectorized"), std::string::npos) << out;
}

// The same with a signed range and a zero point (MobileNetV2's blocks): clamp to [-128, 127],
// cast to int32, add the zero point, cast to uint8.
TEST_F(Vectorize, QuantizedResidualAddWithAZeroPoint) {
  bool skip = false;
  const std::string out = report(R"(graph(%a: u8[4096], %b: u8[4096]) {
  %z: f32[] = constant 128.0
  %sa: f32[] = constant 0.02
  %sb: f32[] = constant 0.03
  %sy: f32[] = constant 0.05
  %zy: i32[] = constant 128
  %1: f32[4096] = cast(%a) {dtype=f32}
  %2: f32[4096] = sub(%1, %z)
  %3: f32[4096] = mul(%2, %sa)
  %4: f32[4096] = cast(%b) {dtype=f32}
  %5: f32[4096] = sub(%4, %z)
  %6: f32[4096] = mul(%5, %sb)
  %7: f32[4096] = add(%3, %6)
  %8: f32[4096] = div(%7, %sy)
  %9: f32[4096] = round(%8)
  %10: f32[4096] = clamp(%9) {min=-128.0, max=127.0}
  %11: i32[4096] = cast(%10) {dtype=i32}
  %12: i32[4096] = add(%11, %zy)
  %13: u8[4096] = cast(%12) {dtype=u8}
  return %13
})",
                                 &skip);
  if (skip) GTEST_SKIP() << "the kernel compiler is not GCC";
  EXPECT_NE(out.find("loop vectorized"), std::string::npos) << out;
}

// A model's float input quantized (the first step of every QDQ model).
TEST_F(Vectorize, QuantizeOfAFloatInput) {
  bool skip = false;
  const std::string out = report(R"(graph(%x: f32[4096]) {
  %s: f32[] = constant 0.05
  %z: i32[] = constant 3
  %1: f32[4096] = div(%x, %s)
  %2: f32[4096] = round(%1)
  %3: f32[4096] = clamp(%2) {min=-3.0, max=252.0}
  %4: i32[4096] = cast(%3) {dtype=i32}
  %5: i32[4096] = add(%4, %z)
  %6: u8[4096] = cast(%5) {dtype=u8}
  return %6
})",
                                 &skip);
  if (skip) GTEST_SKIP() << "the kernel compiler is not GCC";
  EXPECT_NE(out.find("loop vectorized"), std::string::npos) << out;
}

}  // namespace
}  // namespace smelt::codegen
