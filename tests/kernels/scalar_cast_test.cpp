// scalar::cast from a float to an integer (kernels/scalar.h), whose form is chosen for what GCC
// vectorizes, against the definition written the plain way (NaN -> 0, saturation at the wide
// type's ends, truncation toward zero, then modulo 256 for the byte types): on a strided sweep of
// every float bit pattern plus every float near 0 and near the limits, on doubles near the limits
// and random, one element at a time and through the eager cast op (whose loops are vectorized).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/scalar.h"
#include "smelt/smelt.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::bits_of;

template <class To, class From>
To reference_cast(From x) {
  using Wide = std::conditional_t<std::is_signed_v<To> && sizeof(To) >= 4, To, int64_t>;
  const From limit = std::ldexp(From(1), std::numeric_limits<Wide>::digits);  // 2^31 or 2^63
  Wide wide;
  if (std::isnan(x)) {
    wide = 0;
  } else if (x >= limit) {
    wide = std::numeric_limits<Wide>::max();
  } else if (x < -limit) {
    wide = std::numeric_limits<Wide>::min();
  } else {
    wide = Wide(x);
  }
  return To(wide);
}

// Whether every cast of x agrees (the first disagreement is reported; the sweeps stop there).
template <class From>
bool expect_all_casts(From x, int64_t* checked) {
  bool same = true;
  auto one = [&](auto to) {
    using To = decltype(to);
    const To got = scalar::cast<To>(x), want = reference_cast<To>(x);
    if (!same || got == want) return;
    same = false;
    ADD_FAILURE() << "cast of " << x << " (" << sizeof(From) * 8 << "-bit float) to a " << sizeof(To) * 8 << "-bit "
                  << (std::is_signed_v<To> ? "signed" : "unsigned") << " integer: " << int64_t(got) << ", want "
                  << int64_t(want);
  };
  one(int32_t{});
  one(int64_t{});
  one(uint8_t{});
  one(int8_t{});
  one(int16_t{});
  ++*checked;
  return same;
}

float float_of(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(ScalarCast, FloatToIntegerMatchesTheDefinitionOnASweepOfEveryFloat) {
  int64_t checked = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 251) {
    if (!expect_all_casts(float_of(uint32_t(b)), &checked)) return;
  }
  // every float within 2^16 steps of 0 and of each limit (2^31, 2^63, their negatives, and the
  // byte types' wrap points), both sides
  for (float center : {0.0f, 0x1p31f, -0x1p31f, 0x1p63f, -0x1p63f, 256.0f, -129.0f}) {
    const uint32_t c = bits_of(center);
    for (uint32_t d = 0; d < (1u << 16); ++d) {
      if (!expect_all_casts(float_of(c + d), &checked) || !expect_all_casts(float_of(c - d), &checked) ||
          !expect_all_casts(-float_of(c + d), &checked)) {
        return;
      }
    }
  }
  for (float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::denorm_min(), -0.0f, 0.5f, -0.5f, 255.5f}) {
    expect_all_casts(special, &checked);
  }
  EXPECT_GT(checked, 17000000);
}

TEST(ScalarCast, DoubleToIntegerMatchesTheDefinitionNearTheLimitsAndAtRandom) {
  int64_t checked = 0;
  for (double center : {0.0, 0x1p31, -0x1p31, 0x1p63, -0x1p63, 2147483647.0, -2147483649.0}) {
    double up = center, down = center;
    for (int i = 0; i < 4096; ++i) {
      if (!expect_all_casts(up, &checked) || !expect_all_casts(down, &checked)) return;
      up = std::nextafter(up, std::numeric_limits<double>::infinity());
      down = std::nextafter(down, -std::numeric_limits<double>::infinity());
    }
  }
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000000; ++i) {
    const uint64_t u = rng();
    double x;
    std::memcpy(&x, &u, sizeof x);
    // any bit pattern (mostly huge or tiny), and values around the integers
    if (!expect_all_casts(x, &checked) ||
        !expect_all_casts(std::ldexp(double(int64_t(rng())), -int(rng() % 80)), &checked)) {
      return;
    }
  }
  for (double special : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min(), -0.0}) {
    expect_all_casts(special, &checked);
  }
}

// The eager cast op runs scalar::cast in vectorized loops: every lane as the definition.
TEST(ScalarCast, EagerCastOpMatchesTheDefinitionOnEveryLane) {
  std::vector<float> values;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 65521) values.push_back(float_of(uint32_t(b)));
  for (float x : {0x1p31f, -0x1p31f, 0x1p63f, -0x1p63f, 2147483520.0f, -2147483520.0f, -0.75f, 0.75f}) values.push_back(x);
  const Tensor x = from_vector(std::vector<double>(values.begin(), values.end()), {int64_t(values.size())});
  const Tensor to_i32 = cast(x, DType::Int32), to_i64 = cast(x, DType::Int64), to_u8 = cast(x, DType::UInt8);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(to_i32.data<int32_t>()[i], reference_cast<int32_t>(values[i])) << values[i];
    ASSERT_EQ(to_i64.data<int64_t>()[i], reference_cast<int64_t>(values[i])) << values[i];
    ASSERT_EQ(to_u8.data<uint8_t>()[i], reference_cast<uint8_t>(values[i])) << values[i];
  }
}

}  // namespace
}  // namespace smelt
