// cast between every pair of dtypes at the edges (NaN, ±inf, ±0, huge, subnormal, int64 and int32
// extremes), against a reference written here from the documented rules (kernels/scalar.h, `cast`):
// to bool x != 0; float -> int64 / int32 truncates and saturates at the target's range with
// NaN -> 0; float -> uint8 goes through int64 then wraps modulo 256; integer -> narrower integer
// wraps (two's complement); int -> float rounds to nearest.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/check.h"

namespace smelt {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kTwo63 = 9223372036854775808.0;
constexpr double kTwo31 = 2147483648.0;
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();

const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Int64,
                                 DType::Int32,   DType::Bool,    DType::UInt8, DType::Int8};

// An element as raw bits widened to 8 bytes, so that NaN == NaN, -0 != +0 and int64 is exact.
std::vector<uint64_t> bits_of(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<uint64_t> out;
  const char* p = static_cast<const char*>(c.raw_data());
  const size_t es = dtype_size(c.dtype());
  for (int64_t i = 0; i < c.numel(); ++i) {
    uint64_t u = 0;
    std::memcpy(&u, p + size_t(i) * es, es);
    if (c.dtype() == DType::Float32 || c.dtype() == DType::Float64) {
      double d = c.dtype() == DType::Float32 ? double(*reinterpret_cast<const float*>(p + i * es))
                                             : *reinterpret_cast<const double*>(p + i * es);
      if (std::isnan(d)) u = 0x7ff8000000000000ull;  // any NaN is NaN
    }
    out.push_back(u);
  }
  return out;
}

// The reference: the value `v` of source dtype `from` converted to `to`, as 8 raw bytes.
uint64_t ref_bits(long double v, DType from, DType to) {
  const bool from_float = from == DType::Float32 || from == DType::Float64;
  uint64_t u = 0;
  auto put = [&](const auto& x) { std::memcpy(&u, &x, sizeof x); };
  auto to_int64 = [](long double x) -> int64_t {
    if (std::isnan(x)) return 0;
    if (x >= kTwo63) return kMax;
    if (x < -kTwo63) return kMin;
    return int64_t(std::trunc(x));
  };
  // floats saturate at int32's own range; integers keep their low 32 bits
  auto to_int32 = [&](long double x) -> int32_t {
    if (!from_float) return int32_t(uint32_t(uint64_t(int64_t(x)) & 0xffffffffu));
    if (std::isnan(x)) return 0;
    if (x >= kTwo31) return kMax32;
    if (x < -kTwo31) return kMin32;
    return int32_t(std::trunc(x));
  };
  switch (to) {
    case DType::Bool: put(bool(v != 0)); break;
    case DType::Int64: put(to_int64(v)); break;
    case DType::Int32: put(to_int32(v)); break;
    case DType::UInt8: put(uint8_t(uint64_t(to_int64(v)) & 0xff)); break;
    case DType::Int8: put(int8_t(uint8_t(uint64_t(to_int64(v)) & 0xff))); break;
    case DType::Float32: put(float(v)); break;
    case DType::Float64: put(double(v)); break;
  }
  if ((to == DType::Float32 || to == DType::Float64) && std::isnan(v)) u = 0x7ff8000000000000ull;
  return u;
}

// Source values per dtype, as exact long doubles (int64 fits a long double's 64-bit mantissa).
std::vector<long double> edge_values(DType from) {
  switch (from) {
    case DType::Float32:
      return {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.0f, -0.0f, 2.5f, -2.5f, -1.0f, 255.5f,
              256.0f, 300.0f, -129.0f, 1e-40f, -1e-40f, float(kTwo63), -float(kTwo63),
              std::nextafter(float(kTwo63), 0.0f), 3.4e38f, float(kTwo31), -float(kTwo31),
              std::nextafter(float(kTwo31), 0.0f), -0.9f};
    case DType::Float64:
      return {NAN, INFINITY, -INFINITY, 1e30, -1e30, 0.0, -0.0, 2.5, -2.5, -1.0, 255.5, 256.0,
              300.0, -129.0, 4.9e-324, 1e300, -1e300, kTwo63, -kTwo63, std::nextafter(kTwo63, 0.0),
              -kTwo63 - 4096.0, 16777217.0, kTwo31, -kTwo31, kTwo31 - 0.5, -kTwo31 - 0.5,
              -kTwo31 - 1.0, 4294967296.0 + 5.0};
    case DType::Int64:
      return {(long double)kMin, (long double)kMax, -1, 0, 1, 255, 256, -256, 16777217,
              (long double)((int64_t(1) << 53) + 1), kTwo31, -kTwo31 - 1, 4294967296.0L + 7};
    case DType::Int32:
      return {(long double)kMin32, (long double)kMax32, -1, 0, 1, 255, 256, -256, 16777217, -129};
    case DType::Bool: return {0, 1};
    case DType::UInt8: return {0, 1, 127, 128, 255};
    case DType::Int8: return {-128, -127, -1, 0, 1, 127};
  }
  return {};
}

Tensor make(const std::vector<long double>& values, DType dtype) {
  Tensor t = empty({int64_t(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    long double v = values[i];
    switch (dtype) {
      case DType::Float32: t.data<float>()[i] = float(v); break;
      case DType::Float64: t.data<double>()[i] = double(v); break;
      case DType::Int64: t.data<int64_t>()[i] = int64_t(v); break;
      case DType::Int32: t.data<int32_t>()[i] = int32_t(v); break;
      case DType::Bool: t.data<bool>()[i] = v != 0; break;
      case DType::UInt8: t.data<uint8_t>()[i] = uint8_t(v); break;
      case DType::Int8: t.data<int8_t>()[i] = int8_t(v); break;
    }
  }
  return t;
}

TEST(CastEdges, EveryPairOfDTypesAtTheEdges) {
  for (DType from : kAll) {
    std::vector<long double> values = edge_values(from);
    Tensor src = make(values, from);
    for (DType to : kAll) {
      std::vector<uint64_t> got = bits_of(cast(src, to));
      ASSERT_EQ(got.size(), values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(got[i], ref_bits(values[i], from, to))
            << dtype_name(from) << " " << double(values[i]) << " -> " << dtype_name(to);
      }
    }
  }
}

TEST(CastEdges, StridedAndBroadcastSourcesConvertTheSame) {
  Tensor src = make(edge_values(DType::Float64), DType::Float64);
  Tensor strided = src.slice(0, 1, src.size(0), 3);
  for (DType to : kAll) {
    EXPECT_EQ(bits_of(cast(strided, to)), bits_of(cast(strided.contiguous(), to))) << dtype_name(to);
  }
  Tensor nan = make({NAN}, DType::Float32).expand({5});
  EXPECT_EQ(bits_of(cast(nan, DType::Int64)), std::vector<uint64_t>(5, 0));
}

TEST(CastEdges, InRangeValuesMatchPyTorch) {
  // PyTorch 1.13: torch.tensor([2.5, -2.5, 300., -1.]).to(torch.uint8) -> [2, 254, 44, 255];
  // to(torch.int64) -> [2, -2, 300, -1]; int64 [-1, 256] -> uint8 [255, 0]
  Tensor x = from_vector(std::vector<float>{2.5f, -2.5f, 300.0f, -1.0f}, {4});
  EXPECT_EQ(cast(x, DType::UInt8).to_vector(), (std::vector<double>{2, 254, 44, 255}));
  EXPECT_EQ(cast(x, DType::Int64).to_vector(), (std::vector<double>{2, -2, 300, -1}));
  EXPECT_EQ(cast(from_vector(std::vector<int64_t>{-1, 256}, {2}), DType::UInt8).to_vector(),
            (std::vector<double>{255, 0}));
  // PyTorch 1.13: torch.tensor([2.9, -2.9, -0.0]).to(torch.int32) -> [2, -2, 0];
  // torch.tensor([2**31, -2**31 - 1]).to(torch.int32) -> [-2147483648, 2147483647] (wraps);
  // torch.tensor([-2**31], dtype=torch.int32).long() -> [-2147483648]
  EXPECT_EQ(cast(make({2.9L, -2.9L, -0.0L}, DType::Float32), DType::Int32).to_vector(),
            (std::vector<double>{2, -2, 0}));
  EXPECT_EQ(cast(make({kTwo31, -kTwo31 - 1}, DType::Int64), DType::Int32).to_vector(),
            (std::vector<double>{-kTwo31, kTwo31 - 1}));
  EXPECT_EQ(cast(make({-kTwo31}, DType::Int32), DType::Int64).to_vector(), std::vector<double>{-kTwo31});
  // NaN to bool is true (PyTorch: the same)
  EXPECT_EQ(cast(make({NAN, -0.0L}, DType::Float32), DType::Bool).to_vector(), (std::vector<double>{1, 0}));
}

}  // namespace
}  // namespace smelt
