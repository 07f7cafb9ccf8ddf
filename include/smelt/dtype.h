// Element types. float32 computes, float64 checks gradients, int64 indexes, int32 comes in from
// ONNX models (and numpy), bool/uint8 mask; uint8/int8 also hold quantized values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace smelt {

// The dtype table, the one list every per-dtype switch is written from:
// X(Enum, C++ type, name, short name). Rows are only ever appended: the enum values appear in
// kernel-cache keys and tuning files.
#define SMELT_FOR_EACH_DTYPE(X)               \
  X(Float32, float, "float32", "f32")         \
  X(Float64, double, "float64", "f64")        \
  X(Int64, int64_t, "int64", "i64")           \
  X(Bool, bool, "bool", "bool")               \
  X(UInt8, uint8_t, "uint8", "u8")            \
  X(Int32, int32_t, "int32", "i32")          \
  X(Int8, int8_t, "int8", "i8")

#define SMELT_DTYPE_ENUM_ROW(E, T, N, S) E,
enum class DType : uint8_t { SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_ENUM_ROW) };
#undef SMELT_DTYPE_ENUM_ROW

#define SMELT_DTYPE_COUNT_ROW(E, T, N, S) +1
inline constexpr int kDTypeCount = 0 SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_COUNT_ROW);
#undef SMELT_DTYPE_COUNT_ROW

size_t dtype_size(DType t);
const char* dtype_name(DType t);        // "float32", ...
const char* dtype_short_name(DType t);  // "f32", ... (the IR text's spelling)
bool dtype_is_floating(DType t);
// int64 and int32: the signed integers that arithmetic accepts (bool and uint8 are masks/bytes).
bool dtype_is_signed_integer(DType t);
// Parses "float32"/"f32"/..., throws smelt::Error listing the valid names otherwise.
DType dtype_from_name(const std::string& name);

// The C++ type behind each dtype, for kernels: DTypeOf<float>::value == DType::Float32.
template <class T> struct DTypeOf;
#define SMELT_DTYPE_OF_ROW(E, T, N, S) \
  template <> struct DTypeOf<T> { static constexpr DType value = DType::E; };
SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_OF_ROW)
#undef SMELT_DTYPE_OF_ROW

}  // namespace smelt
