// libFuzzer target: the ONNX importer on arbitrary bytes.
//
// An input must either import or be refused with a smelt::Error (onnx::Unsupported included) that
// is a user error (not Error::internal(), a smelt bug) with a bounded message. Any other exception,
// a crash or a sanitizer report is a bug. Symbolic dims get the value 2, so that models with
// dynamic inputs get past input declaration into the converters. An imported graph must verify.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "smelt/onnx.h"

namespace {

constexpr size_t kMaxMessageChars = 2000;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "onnx_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    smelt::onnx::ImportOptions options;
    for (const char* name : {"N", "batch", "B", "T", "seq", "dim"}) options.dims[name] = 2;
    smelt::onnx::Model m = smelt::onnx::import_model_bytes(bytes, options);
    m.graph.verify();
  } catch (const smelt::Error& e) {
    const std::string message = e.what();
    if (e.internal()) bug("internal error", message);
    if (message.size() > kMaxMessageChars) bug("unbounded message", std::to_string(message.size()) + " characters");
  }
  return 0;
}
