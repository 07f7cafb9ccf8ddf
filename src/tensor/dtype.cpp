#include "smelt/dtype.h"

#include "smelt/error.h"

namespace smelt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::UInt8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

bool dtype_is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

DType dtype_from_name(const std::string& name) {
  if (name == "float32" || name == "f32") return DType::Float32;
  if (name == "float64" || name == "f64") return DType::Float64;
  if (name == "int64" || name == "i64") return DType::Int64;
  if (name == "bool") return DType::Bool;
  if (name == "uint8" || name == "u8") return DType::UInt8;
  SMELT_CHECK(false) << "unknown dtype '" << name
                     << "'; valid: float32 (f32), float64 (f64), int64 (i64), bool, uint8 (u8)";
  return DType::Float32;
}

}  // namespace smelt
