#include "fuzz/special_values.h"

#include <cmath>
#include <limits>
#include <vector>

#include "smelt/error.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz {
namespace {

template <class T>
T special_of(std::mt19937_64& rng) {
  using L = std::numeric_limits<T>;
  const bool f32 = sizeof(T) == 4;
  const T values[] = {
      L::quiet_NaN(), -L::quiet_NaN(), L::infinity(), -L::infinity(),
      T(0), -T(0), T(0), -T(0), -T(0),  // zeros weigh more: real data has many, and -0 hides well
      L::denorm_min(), -L::denorm_min(), L::min() / T(3), -L::min() / T(5),  // subnormals
      L::min(), -L::min(), L::max(), L::lowest(),
      T(f32 ? 1e30 : 1e300), T(f32 ? -1e30 : -1e300), T(f32 ? 1e-30 : 1e-300), T(f32 ? -3e-30 : -3e-300),
      T(1), T(-1), T(2), T(0.5), T(0x1p-126), T(0x1p100),                    // powers of two
      T(0x1p63), T(-0x1p63), T(f32 ? 0x1p62 : 0x1.fffffffffffffp62),          // int64 boundaries
      T(0x1p53) + T(2), T(0x1p24) + T(1),  // integers where float64 / float32 spacing exceeds 1
  };
  constexpr size_t kCount = sizeof(values) / sizeof(values[0]);
  return values[std::uniform_int_distribution<size_t>(0, kCount - 1)(rng)];
}

}  // namespace

double special_float(DType dtype, std::mt19937_64& rng) {
  SMELT_INTERNAL_CHECK(dtype_is_floating(dtype)) << "special_float: " << dtype_name(dtype);
  return dtype == DType::Float32 ? double(special_of<float>(rng)) : special_of<double>(rng);
}

int64_t special_int64(std::mt19937_64& rng) {
  using L = std::numeric_limits<int64_t>;
  constexpr int64_t k253 = int64_t(1) << 53;
  const int64_t values[] = {L::min(), L::max(), L::min() + 1, L::max() - 1, k253 + 1, -(k253 + 1),
                            k253,     0,        1,            -1,           int64_t(1) << 62,
                            int64_t(1) << 32, -(int64_t(1) << 31), 3};
  constexpr size_t kCount = sizeof(values) / sizeof(values[0]);
  return values[std::uniform_int_distribution<size_t>(0, kCount - 1)(rng)];
}

Tensor random_tensor(const Shape& shape, DType dtype, const ElementDraw& draw, std::mt19937_64& rng) {
  const int64_t n = shape_numel(shape);
  std::bernoulli_distribution is_special(draw.special);
  if (dtype == DType::Int64) {
    std::uniform_int_distribution<int64_t> uniform(int64_t(std::ceil(draw.low)), int64_t(std::floor(draw.high)));
    std::vector<int64_t> values(static_cast<size_t>(n));
    for (int64_t& v : values) v = is_special(rng) ? special_int64(rng) : uniform(rng);
    return from_vector(values, shape);
  }
  if (dtype == DType::Int32) {  // int64 draws wrapped to 32 bits: the extremes map to int32's
    return cast(random_tensor(shape, DType::Int64, draw, rng), DType::Int32);
  }
  if (dtype == DType::UInt8 || dtype == DType::Int8) {
    const int lowest = dtype == DType::UInt8 ? 0 : -128, highest = lowest + 255;
    std::uniform_int_distribution<int> any(lowest, highest);
    std::bernoulli_distribution upper(0.5);
    std::vector<double> values(static_cast<size_t>(n));
    for (double& v : values) v = is_special(rng) ? (upper(rng) ? highest : lowest) : any(rng);
    return from_vector(values, shape, dtype);
  }
  if (dtype == DType::Bool) {
    std::vector<double> values(static_cast<size_t>(n));
    for (double& v : values) v = double(std::bernoulli_distribution(0.5)(rng));
    return from_vector(values, shape, DType::Bool);
  }
  SMELT_INTERNAL_CHECK(dtype_is_floating(dtype)) << "random_tensor: " << dtype_name(dtype);
  std::uniform_real_distribution<double> uniform(draw.low, draw.high);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = is_special(rng) ? special_float(dtype, rng) : uniform(rng);
  return from_vector(values, shape, dtype);  // float32 elements round to nearest
}

}  // namespace smelt::fuzz
