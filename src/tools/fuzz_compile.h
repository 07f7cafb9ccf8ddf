// smelt fuzz --compile: the compile fuzzer (fuzz/compile_fuzzer.h) from the command line.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/random_graph.h"

namespace smelt::tools {

struct CompileFuzzArgs {
  uint64_t seed = 1;
  int64_t cases = 1000;
  fuzz::RandomGraphOptions graphs;
  std::string passes;             // before fusion; a trailing ",fuse" is dropped (compile fuses)
  std::string backend = "both";   // interpreter, cpp or both
  std::string out;                // directory for minimized failing cases
  int batch = 128;                // cases prepared at once (their cpp kernels compile together)
  int second_batch = 10;          // every n-th case also at two more batch sizes (fuzz/second_batch.h); 0: none
  int gradients = 10;             // every n-th case also split into forward and backward (fuzz/gradient_check.h)
};

// Prints one line per failure, counts and timings per backend, then "N passed, M failed".
// Throws CLI::RuntimeError (exit code 1, saying how many failed) when a case failed.
void run_compile_fuzz(const CompileFuzzArgs& args);

}  // namespace smelt::tools
