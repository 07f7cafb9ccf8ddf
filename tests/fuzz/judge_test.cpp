// The compile fuzzers' verdict (fuzz/judge.h): exact outputs bit for bit whatever ordinary inputs
// say; tolerant outputs within the tolerance; a cancellation no reference pins down left out; a
// wrong tolerant output still caught.
#include "fuzz/judge.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fuzz/compare.h"
#include "ir/printer.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

// One exact output (x * 3) and one tolerant output (sum of x).
std::unique_ptr<ir::Graph> two_outputs() {
  return ir::parse(R"(graph(%0: f32[2, 8]) {
  %1: f32[] = constant 3
  %2: f32[2, 8] = mul(%0, %1)
  %3: f32[2] = sum(%0) {dims=[1], keepdim=0}
  return %2, %3
})");
}

Tensor nudged(const Tensor& t, double by) {
  std::vector<double> v = t.to_vector();
  v[0] += by;
  return from_vector(v, t.shape()).to(t.dtype());
}

TEST(Judge, AnExactOutputOneUlpOffFailsEvenWhenOrdinaryInputsMatch) {
  auto g = two_outputs();
  const std::vector<Tensor> in = fuzz::random_inputs(*g, 7, 0.5), ordinary = fuzz::random_inputs(*g, 7, 0.0);
  const std::vector<Tensor> want = trace::interpret(*g, in);
  std::vector<Tensor> got = want;
  const float x = got[0].to_vector()[0] == 0 ? 1.0f : float(got[0].to_vector()[0]);
  got[0] = nudged(want[0], double(std::nextafter(x, INFINITY)) - double(x));
  fuzz::Judge judge(*g, {false, true});
  const std::string d = judge.verdict(in, got, want, [&](const std::vector<Tensor>& i) { return trace::interpret(*g, i); },
                                      ordinary, nullptr);
  EXPECT_NE(d.find("output 0"), std::string::npos) << d;
}

TEST(Judge, AWrongTolerantOutputFails) {
  auto g = two_outputs();
  const std::vector<Tensor> in = fuzz::random_inputs(*g, 8, 0.0);
  const std::vector<Tensor> want = trace::interpret(*g, in);
  std::vector<Tensor> got = want;
  got[1] = nudged(want[1], 0.5);
  // The plan is wrong on the ordinary inputs too.
  auto wrong = [&](const std::vector<Tensor>& i) {
    std::vector<Tensor> out = trace::interpret(*g, i);
    out[1] = nudged(out[1], 0.5);
    return out;
  };
  fuzz::Judge judge(*g, {false, true});
  const std::string d = judge.verdict(in, got, want, wrong, in, nullptr);
  EXPECT_NE(d.find("output 1"), std::string::npos) << d;
  EXPECT_FALSE(judge.ill_conditioned());
}

TEST(Judge, ARoundingWithinTheToleranceOfATolerantOutputPasses) {
  auto g = two_outputs();
  const std::vector<Tensor> in = fuzz::random_inputs(*g, 9, 0.0);
  const std::vector<Tensor> want = trace::interpret(*g, in);
  std::vector<Tensor> got = want;
  got[1] = nudged(want[1], 1e-6);
  fuzz::Judge judge(*g, {false, true});
  int rounded = 0;
  EXPECT_EQ(judge.verdict(in, got, want, [&](const std::vector<Tensor>& i) { return trace::interpret(*g, i); }, in,
                          &rounded),
            "");
  EXPECT_EQ(rounded, 1);
}

}  // namespace
}  // namespace smelt
