// NumPy .npy files (format versions 1-3, C order, little-endian): float32, float64, int64, bool,
// uint8 — what `smelt run --input` reads and `--save-outputs` writes.
#pragma once

#include <string>

#include "smelt/tensor.h"

namespace smelt::io {

Tensor read_npy(const std::string& path);
// Parses .npy bytes; `what` names the source in errors.
Tensor parse_npy(const std::string& bytes, const std::string& what);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace smelt::io
