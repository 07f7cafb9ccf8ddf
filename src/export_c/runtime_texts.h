// The C sources an exported model is made of besides its own kernels and weights: export_c/runtime/
// (the scalar functions per dtype, the ops' portable loops), embedded in libsmelt at build time
// (cmake/embed_texts.cmake) so that an export never reads the source tree.
#pragma once

#include <string>
#include <vector>

namespace smelt::export_c {

struct RuntimeText {
  const char* path;  // relative to src/, e.g. "export_c/runtime/ops.h"
  const char* text;
};

const std::vector<RuntimeText>& runtime_texts();

// The text of `path` (a smelt::Error naming the embedded paths when there is none).
std::string runtime_text(const std::string& path);

}  // namespace smelt::export_c
