// Element types. float32 computes, float64 checks gradients, int64 indexes, bool/uint8 mask.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace smelt {

enum class DType : uint8_t { Float32, Float64, Int64, Bool, UInt8 };

inline constexpr int kDTypeCount = 5;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", ...
bool dtype_is_floating(DType t);
// Parses "float32"/"f32"/..., throws smelt::Error listing the valid names otherwise.
DType dtype_from_name(const std::string& name);

// The C++ type behind each dtype, for kernels: DTypeOf<float>::value == DType::Float32.
template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };

}  // namespace smelt
