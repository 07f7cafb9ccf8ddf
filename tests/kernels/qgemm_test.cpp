// The integer GEMM (kernels/qgemm.h) against a naive int64 reference, on every instruction set
// this CPU has: exact int32 accumulators, the same requantized bytes, tails in every dim, both
// signednesses of B, per-column zero points and scales, and the operands where vpmaddubsw's
// int16 pair sums would saturate.
#include "kernels/qgemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "smelt/error.h"

namespace smelt::kernels {
namespace {

struct QGemmCase {
  int64_t m, n, k;
  bool b_unsigned = false;
  bool per_column = false;  // zero points and scales
  int32_t za = 0;
};

struct Operands {
  std::vector<uint8_t> a;  // m x lda
  int64_t lda;
  std::vector<uint8_t> b;  // k x n raw bytes (int8 or uint8)
  std::vector<int32_t> zb;
  std::vector<float> scale;
  std::vector<int32_t> bias;
};

Operands make(const QGemmCase& c, std::mt19937& rng, bool extremes) {
  Operands o;
  o.lda = c.k + 3;  // rows apart by more than their length
  std::uniform_int_distribution<int> byte(0, 255);
  o.a.resize(size_t(std::max<int64_t>(c.m * o.lda, 1)));
  for (auto& v : o.a) v = extremes ? 255 : uint8_t(byte(rng));
  o.b.resize(size_t(std::max<int64_t>(c.k * c.n, 1)));
  for (auto& v : o.b) v = extremes ? (c.b_unsigned ? 255 : 0x81 /* -127 */) : uint8_t(byte(rng));
  const int64_t cols = c.per_column ? c.n : 1;
  std::uniform_int_distribution<int> zp(c.b_unsigned ? 0 : -128, c.b_unsigned ? 255 : 127);
  for (int64_t j = 0; j < std::max<int64_t>(cols, 1); ++j) {
    o.zb.push_back(extremes ? (c.b_unsigned ? 0 : 0) : zp(rng));
    o.scale.push_back(std::ldexp(float(1 + byte(rng)), -14 - int(j % 3)));
  }
  std::uniform_int_distribution<int32_t> bias(-100000, 100000);
  for (int64_t j = 0; j < c.n; ++j) o.bias.push_back(bias(rng));
  return o;
}

int64_t reference_acc(const QGemmCase& c, const Operands& o, int64_t i, int64_t j) {
  int64_t acc = 0;
  const int32_t zb = o.zb[c.per_column ? size_t(j) : 0];
  for (int64_t kk = 0; kk < c.k; ++kk) {
    const uint8_t raw = o.b[size_t(kk * c.n + j)];
    const int32_t bv = c.b_unsigned ? int32_t(raw) : int32_t(int8_t(raw));
    acc += int64_t(int32_t(o.a[size_t(i * o.lda + kk)]) - c.za) * (bv - zb);
  }
  return acc;
}

std::vector<QGemmIsa> u8s8_isas() {
  std::vector<QGemmIsa> out;
  for (QGemmIsa isa : {QGemmIsa::Portable, QGemmIsa::Avx2, QGemmIsa::Avx512Vnni}) {
    if (qgemm_isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

void check_case(const QGemmCase& c, QGemmIsa isa, std::mt19937& rng, bool extremes) {
  SCOPED_TRACE(::testing::Message() << qgemm_isa_name(isa) << " m=" << c.m << " n=" << c.n
                                  << " k=" << c.k << " b_unsigned=" << c.b_unsigned
                                  << " per_column=" << c.per_column << " za=" << c.za);
  const Operands o = make(c, rng, extremes);
  const QPackedB packed = qgemm_pack_b(o.b.data(), c.b_unsigned, c.k, c.n, c.n, 1, o.zb, isa);
  const int64_t ldc = c.n + 1;
  // int32 accumulators, exactly
  std::vector<int32_t> acc(size_t(std::max<int64_t>(c.m * ldc, 1)), -7);
  QGemmOutput out;
  out.data = acc.data();
  out.ldc = ldc;
  qgemm_u8s8(c.m, o.a.data(), o.lda, c.za, packed, out);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      ASSERT_EQ(acc[size_t(i * ldc + j)], reference_acc(c, o, i, j)) << "at " << i << "," << j;
    }
    if (c.n) {
      ASSERT_EQ(acc[size_t(i * ldc + c.n)], -7) << "wrote past the row";
    }
  }
  // requantized to uint8 and int8 with bias, per-column scales and a fused ReLU; and to float
  for (QGemmOutput::Type type :
       {QGemmOutput::Type::UInt8, QGemmOutput::Type::Int8, QGemmOutput::Type::Float32}) {
    std::vector<uint8_t> bytes(size_t(std::max<int64_t>(c.m * ldc, 1)) * 4, 0xAB);
    QGemmOutput q;
    q.type = type;
    q.data = bytes.data();
    q.ldc = ldc;
    q.bias = o.bias.data();
    q.scale = o.scale.data();
    q.per_column_scale = c.per_column;
    q.zero_point = type == QGemmOutput::Type::UInt8 ? 100 : -5;
    q.lo = q.zero_point;  // ReLU
    qgemm_u8s8(c.m, o.a.data(), o.lda, c.za, packed, q);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const int64_t a64 = reference_acc(c, o, i, j) + o.bias[size_t(j)];
        const float s = o.scale[c.per_column ? size_t(j) : 0];
        const float y = float(int32_t(a64)) * s;
        const size_t at = size_t(i * ldc + j);
        if (type == QGemmOutput::Type::Float32) {
          ASSERT_EQ(reinterpret_cast<const float*>(bytes.data())[at], y);
          continue;
        }
        const int64_t lo = type == QGemmOutput::Type::UInt8 ? 100 : -5;
        const int64_t hi = type == QGemmOutput::Type::UInt8 ? 255 : 127;
        const int64_t want = std::clamp<int64_t>(int64_t(std::nearbyint(double(y))) + q.zero_point, lo, hi);
        const int64_t got = type == QGemmOutput::Type::UInt8 ? int64_t(bytes[at]) : int64_t(int8_t(bytes[at]));
        ASSERT_EQ(got, want) << "at " << i << "," << j << " y=" << y;
      }
    }
  }
}

TEST(QGemm, EveryIsaMatchesTheReferenceOnTailsInEveryDim) {
  std::mt19937 rng(2611);
  for (QGemmIsa isa : u8s8_isas()) {
    for (int64_t m : {0, 1, 5, 6, 8, 9, 17}) {
      for (int64_t n : {0, 1, 15, 16, 17, 33}) {
        for (int64_t k : {0, 1, 3, 4, 5, 37}) {
          check_case({m, n, k, false, (m + n) % 2 == 1, int32_t((m * 37 + k) % 256)}, isa, rng, false);
        }
      }
    }
  }
}

TEST(QGemm, UnsignedWeightsAndPerColumnZeroPoints) {
  std::mt19937 rng(77);
  for (QGemmIsa isa : u8s8_isas()) {
    check_case({13, 70, 129, true, true, 128}, isa, rng, false);
    check_case({7, 40, 64, true, false, 0}, isa, rng, false);
    check_case({7, 40, 64, false, true, 255}, isa, rng, false);
  }
}

// 255 * -127 summed in pairs is -64770: beyond int16, where vpmaddubsw would saturate to -32768.
TEST(QGemm, OperandsWhereInt16PairSumsWouldSaturateAreExact) {
  std::mt19937 rng(5);
  for (QGemmIsa isa : u8s8_isas()) {
    check_case({9, 35, 1000, false, false, 0}, isa, rng, /*extremes=*/true);
    check_case({9, 35, 1000, true, false, 0}, isa, rng, /*extremes=*/true);
  }
}

TEST(QGemm, ThreadedLargeProductEqualsPortable) {
  if (!qgemm_isa_supported(QGemmIsa::Avx2)) GTEST_SKIP() << "no second instruction set here";
  std::mt19937 rng(9);
  const QGemmCase c{200, 300, 300, false, true, 3};
  const Operands o = make(c, rng, false);
  std::vector<std::vector<int32_t>> results;
  for (QGemmIsa isa : u8s8_isas()) {
    const QPackedB packed = qgemm_pack_b(o.b.data(), false, c.k, c.n, c.n, 1, o.zb, isa);
    std::vector<int32_t> acc(size_t(c.m * c.n));
    QGemmOutput out;
    out.data = acc.data();
    out.ldc = c.n;
    qgemm_u8s8(c.m, o.a.data(), o.lda, c.za, packed, out);
    results.push_back(acc);
  }
  for (size_t r = 1; r < results.size(); ++r) EXPECT_EQ(results[r], results[0]) << qgemm_isa_name(u8s8_isas()[r]);
  EXPECT_EQ(int64_t(results[0][12345]), reference_acc(c, o, 12345 / c.n, 12345 % c.n));
}

TEST(QGemm, TransposedWeightStridesPackTheSameMatrix) {
  std::mt19937 rng(1);
  const int64_t k = 19, n = 21;
  std::vector<int8_t> b(size_t(k * n)), bt(size_t(k * n));
  std::uniform_int_distribution<int> v(-128, 127);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      bt[size_t(j * k + i)] = b[size_t(i * n + j)] = int8_t(v(rng));
    }
  }
  for (QGemmIsa isa : u8s8_isas()) {
    const QPackedB p1 = qgemm_pack_b(b.data(), false, k, n, n, 1, {0}, isa);
    const QPackedB p2 = qgemm_pack_b(bt.data(), false, k, n, 1, k, {0}, isa);
    EXPECT_EQ(p1.bytes, p2.bytes);
    EXPECT_EQ(p1.words, p2.words);
    EXPECT_EQ(p1.col_sums, p2.col_sums);
  }
}

TEST(QGemm, BadArgumentsAreClearErrors) {
  const std::vector<int8_t> b(4, 1);
  EXPECT_THROW(qgemm_pack_b(b.data(), false, 2, 2, 2, 1, {0, 0, 0}, QGemmIsa::Portable), Error);
  EXPECT_THROW(qgemm_pack_b(b.data(), false, 2, 2, 2, 1, {200}, QGemmIsa::Portable), Error);
  EXPECT_THROW(qgemm_pack_b(b.data(), true, 2, 2, 2, 1, {-1}, QGemmIsa::Portable), Error);
  const QPackedB p = qgemm_pack_b(b.data(), false, 2, 2, 2, 1, {0}, QGemmIsa::Portable);
  const std::vector<uint8_t> a(4, 1);
  std::vector<int32_t> c(4);
  QGemmOutput out;
  out.data = c.data();
  out.ldc = 2;
  EXPECT_THROW(qgemm_u8s8(2, a.data(), 2, 256, p, out), Error);
  EXPECT_THROW(qgemm_u8s8(2, a.data(), 1, 0, p, out), Error);
  out.type = QGemmOutput::Type::UInt8;
  EXPECT_THROW(qgemm_u8s8(2, a.data(), 2, 0, p, out), Error);  // no scale
}

TEST(QGemm, RequantizeRoundsHalfToEvenAndSaturates) {
  EXPECT_EQ(requantize_one(5, 0.5f, 0, -128, 127), 2);   // 2.5 -> 2
  EXPECT_EQ(requantize_one(7, 0.5f, 0, -128, 127), 4);   // 3.5 -> 4
  EXPECT_EQ(requantize_one(-5, 0.5f, 0, -128, 127), -2);
  EXPECT_EQ(requantize_one(1000, 1.0f, 10, -128, 127), 127);
  EXPECT_EQ(requantize_one(-2147483647 - 1, 1e30f, 0, 0, 255), 0);
  EXPECT_EQ(requantize_one(2147483647, 1e30f, 0, 0, 255), 255);
}

}  // namespace
}  // namespace smelt::kernels
