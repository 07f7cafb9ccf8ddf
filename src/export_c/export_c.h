// The standalone C export (docs/export_c.md): a graph compiled by smelt's own pipeline (passes,
// fusion, memory plan) written out as C11 that needs nothing but a C compiler and libm: the fused
// kernels are the plan's LoopKernels emitted as C (codegen::emit_c), the other steps call portable
// C implementations of their ops (export_c/runtime/), intermediates live in one arena laid
// out by smelt's memory plan, weights are const arrays or one binary file. No malloc, no threads
// (OpenMP pragmas only behind macros), the same result on every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::export_c {

enum class Weights : uint8_t {
  Embed,  // const arrays in model.c
  File,   // <name>.weights, which the caller loads and passes to <name>_run
};

// The blocking of the GEMM that suits the target's vector registers (op_calls.h gemm_tile): its
// only effect on the code.
enum class Target : uint8_t { Generic, X86_64_V3, X86_64_V4, Aarch64 };
Target target_from_name(const std::string& name);  // generic, x86-64-v3, x86-64-v4, aarch64
const char* target_name(Target target);

struct Options {
  std::string name = "model";  // file names and the prefix of every public symbol: a C identifier
  Weights weights = Weights::Embed;
  Target target = Target::Generic;
  // 3x3 stride-1 convolutions (of 16 channels and more) by Winograd's F(2x2, 3x3), as smelt's own
  // plan runs them: 4/9 of the multiplications, a slightly different rounding. false: every
  // convolution by im2col GEMM (or direct loops, depthwise).
  bool winograd = true;
};

struct File {
  std::string name;     // "model.c", "model.h", "model.weights"
  std::string content;  // text, or the weights' bytes
};

struct Exported {
  std::vector<File> files;
  int64_t arena_bytes = 0;    // the memory plan's arena plus the ops' scratch (packing, im2col)
  int64_t scratch_bytes = 0;  // of which scratch
  int64_t weight_bytes = 0;
  int kernels = 0;   // fused kernels emitted as C
  int op_calls = 0;  // steps calling the ops of export_c/runtime
  std::string summary;  // a few lines for the command line
};

// Exports `graph` (every input of a fixed shape; consumed by the compile). Throws smelt::Error
// naming every op of the compiled plan the export has no C for, and for anything else it cannot
// write (symbolic sizes, graphs that update their inputs).
Exported export_graph(const ir::Graph& graph, const Options& options);

}  // namespace smelt::export_c
