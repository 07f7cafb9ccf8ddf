// libFuzzer target for `smelt opt`: bytes -> parse -> verify -> print/parse round trip -> each
// registered pass alone (verifier after it) -> the default pipeline -> print -> parse again
// (tests/errors/ir_opt_harness.h). Only smelt::Error may escape, and never one marked internal:
// an internal error aborts, and any other exception or crash is reported by libFuzzer itself.
// Seed corpus: fuzz_targets/corpus/ir_opt/ (the tests/passes and tests/fuzz/regressions files).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../tests/errors/ir_opt_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Texts beyond this size only slow the search; the scaling tests cover large graphs.
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string problem = smelt::ir_opt_harness::run_ir_text(text);
  if (!problem.empty()) {
    std::fprintf(stderr, "ir_opt_fuzz: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
