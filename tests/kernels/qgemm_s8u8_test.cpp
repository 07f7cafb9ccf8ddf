// The weights-on-the-left integer GEMM (kernels/qgemm.h: qgemm_pack_w, qgemm_s8u8) against a
// naive int64 reference on every instruction set this CPU has: exact int32 accumulators and the
// same requantized bytes; tails in every dim; signed and unsigned weights with per-row zero
// points (the column-sum path); int8 activations read through the sign flip; the columns of a
// padded image dropped by the store; operands at their extremes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/qgemm.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

struct S8U8Case {
  int64_t m, n, k;
  bool w_unsigned = false, x_signed = false;
  bool per_row_zero_points = false;  // else every weight zero point is 0 (or 128 unsigned)
  int64_t padded_width = 0, width = 0;
};

std::vector<QGemmIsa> isas() {
  std::vector<QGemmIsa> out;
  for (QGemmIsa isa : {QGemmIsa::Portable, QGemmIsa::Avx2, QGemmIsa::Avx512Vnni, QGemmIsa::Amx}) {
    if (qgemm_isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

int32_t value(uint8_t raw, bool is_signed) { return is_signed ? int32_t(int8_t(raw)) : int32_t(raw); }

void check(const S8U8Case& c, QGemmIsa isa, std::mt19937& rng, bool extremes) {
  SCOPED_TRACE(::testing::Message() << qgemm_isa_name(isa) << " m=" << c.m << " n=" << c.n << " k=" << c.k
                                  << " w_unsigned=" << c.w_unsigned << " x_signed=" << c.x_signed
                                  << " per_row=" << c.per_row_zero_points << " padded=" << c.padded_width);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t ldw = c.k + 2, ldx = c.n + 5;
  std::vector<uint8_t> w(size_t(std::max<int64_t>(c.m * ldw, 1))), x(size_t(std::max<int64_t>(c.k * ldx, 1)));
  for (auto& v : w) v = extremes ? (c.w_unsigned ? 0 : 0x80 /* -128 */) : uint8_t(byte(rng));
  for (auto& v : x) v = extremes ? (c.x_signed ? 0x7f : 255) : uint8_t(byte(rng));
  std::vector<int32_t> zw(size_t(c.per_row_zero_points ? c.m : 1), c.w_unsigned ? 128 : 0);
  if (c.per_row_zero_points) {
    for (auto& z : zw) z = c.w_unsigned ? byte(rng) : byte(rng) - 128;
  }
  const int32_t zx = extremes ? (c.x_signed ? -128 : 0) : (c.x_signed ? byte(rng) - 128 : byte(rng));
  std::vector<const uint8_t*> rows(size_t(c.k));
  for (int64_t kk = 0; kk < c.k; ++kk) rows[size_t(kk)] = x.data() + kk * ldx;
  std::vector<int32_t> bias(size_t(c.m));
  std::vector<float> scale(size_t(c.m));
  for (int64_t i = 0; i < c.m; ++i) {
    bias[size_t(i)] = int32_t(byte(rng) * 397) - 50000;
    scale[size_t(i)] = std::ldexp(float(1 + byte(rng)), -15 - int(i % 3));
  }
  auto reference = [&](int64_t i, int64_t j) {
    int64_t acc = 0;
    const int32_t z = zw[c.per_row_zero_points ? size_t(i) : 0];
    for (int64_t kk = 0; kk < c.k; ++kk) {
      acc += int64_t(value(w[size_t(i * ldw + kk)], !c.w_unsigned) - z) *
             (value(x[size_t(kk * ldx + j)], c.x_signed) - zx);
    }
    return acc;
  };
  // Where column j is stored (-1: a padding column, dropped).
  const int64_t kept = c.padded_width ? (c.n / c.padded_width) * c.width + std::min(c.n % c.padded_width, c.width) : c.n;
  auto column = [&](int64_t j) -> int64_t {
    if (!c.padded_width) return j;
    return j % c.padded_width < c.width ? (j / c.padded_width) * c.width + j % c.padded_width : -1;
  };
  const QPackedW packed = qgemm_pack_w(w.data(), c.w_unsigned, c.m, c.k, ldw, zw, isa);
  QGemmX operand;
  operand.rows = rows.data();
  operand.n = c.n;
  operand.zero_point = zx + (c.x_signed ? 128 : 0);
  operand.flip_sign = c.x_signed;
  const int64_t ldc = kept + 1;
  for (QGemmOutput::Type type : {QGemmOutput::Type::Int32, QGemmOutput::Type::UInt8, QGemmOutput::Type::Int8}) {
    std::vector<int32_t> out(size_t(std::max<int64_t>(c.m * ldc, 1)), -7);
    QGemmRowOutput o;
    o.type = type;
    o.data = out.data();
    o.ldc = ldc;
    o.padded_width = c.padded_width, o.width = c.width;
    if (type != QGemmOutput::Type::Int32) {
      o.bias = bias.data();
      o.scale = scale.data();
      o.zero_point = type == QGemmOutput::Type::UInt8 ? 90 : -4;
      o.lo = o.zero_point;  // a fused ReLU
    }
    qgemm_s8u8(packed, operand, o);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const int64_t at = column(j);
        if (at < 0) continue;
        const int64_t acc = reference(i, j);
        if (type == QGemmOutput::Type::Int32) {
          ASSERT_EQ(out[size_t(i * ldc + at)], acc) << "at " << i << "," << j;
          continue;
        }
        const float y = float(int32_t(acc + bias[size_t(i)])) * scale[size_t(i)];
        const bool u8 = type == QGemmOutput::Type::UInt8;
        const int64_t want = std::clamp<int64_t>(int64_t(std::nearbyint(double(y))) + o.zero_point, o.zero_point,
                                                 u8 ? 255 : 127);
        // UInt8 / Int8 rows are ldc bytes apart
        const uint8_t raw = reinterpret_cast<const uint8_t*>(out.data())[size_t(i * ldc + at)];
        ASSERT_EQ(u8 ? int64_t(raw) : int64_t(int8_t(raw)), want) << "at " << i << "," << j;
      }
      if (type == QGemmOutput::Type::Int32 && kept < ldc) {
        ASSERT_EQ(out[size_t(i * ldc + kept)], -7) << "wrote past the kept columns of row " << i;
      }
    }
  }
}

TEST(QGemmWeightsLeft, EveryIsaMatchesTheReferenceOnTailsInEveryDim) {
  std::mt19937 rng(4242);
  for (QGemmIsa isa : isas()) {
    for (int64_t m : {1, 5, 8, 9, 17}) {
      for (int64_t n : {1, 15, 16, 31, 32, 33, 70}) {
        for (int64_t k : {1, 3, 4, 5, 37}) {
          check({m, n, k, false, (m + k) % 2 == 1, false}, isa, rng, false);
        }
      }
    }
  }
}

// Whole and partial AMX tiles (32 rows, blocks of 64 k), several k blocks, and images of a few
// panels whose rows split into chunks (their panels packed once, shared by the chunks).
TEST(QGemmWeightsLeft, LargeTilesAndRowChunksOverFewPanels) {
  std::mt19937 rng(2024);
  for (QGemmIsa isa : isas()) {
    for (int64_t m : {31, 32, 33, 70, 130}) {
      for (int64_t n : {33, 61, 250}) {
        for (int64_t k : {64, 65, 300}) {
          check({m, n, k, (m + n) % 3 == 0, k == 65, m == 70}, isa, rng, false);
        }
      }
    }
  }
}

TEST(QGemmWeightsLeft, ZeroPointsPerRowAndUnsignedWeights) {
  std::mt19937 rng(99);
  for (QGemmIsa isa : isas()) {
    check({13, 70, 29, false, false, true}, isa, rng, false);
    check({13, 70, 29, true, true, true}, isa, rng, false);
    check({7, 64, 33, true, false, false}, isa, rng, false);
  }
}

TEST(QGemmWeightsLeft, PaddedImageColumnsAreDropped) {
  std::mt19937 rng(7);
  for (QGemmIsa isa : isas()) {
    check({9, 9 * 5 + 7, 18, false, false, false, 9, 7}, isa, rng, false);   // the last row shorter
    check({16, 58 * 3 + 56, 27, false, true, true, 58, 56}, isa, rng, false);
    check({3, 40, 5, false, false, false, 40, 1}, isa, rng, false);
  }
}

// -128 x 255 summed over 1000 terms: every instruction set stays exact (no int16 saturation).
TEST(QGemmWeightsLeft, ExtremeOperandsAreExact) {
  std::mt19937 rng(5);
  for (QGemmIsa isa : isas()) {
    check({9, 35, 1000, false, false, false}, isa, rng, /*extremes=*/true);
    check({9, 35, 1000, true, true, false}, isa, rng, /*extremes=*/true);
  }
}

TEST(QGemmWeightsLeft, EmptyProductsWriteNothingAndBadArgumentsAreClearErrors) {
  const std::vector<int8_t> w(12, 1);
  const QPackedW packed = qgemm_pack_w(w.data(), false, 3, 4, 4, {0}, QGemmIsa::Portable);
  QGemmX x;
  QGemmRowOutput out;
  qgemm_s8u8(packed, x, out);  // n = 0: nothing to do, nothing read
  EXPECT_THROW(qgemm_pack_w(w.data(), false, 3, 4, 4, {0, 1}, QGemmIsa::Portable), Error);
  EXPECT_THROW(qgemm_pack_w(w.data(), false, 3, 4, 4, {200}, QGemmIsa::Portable), Error);
  x.n = 1;
  x.zero_point = 300;
  EXPECT_THROW(qgemm_s8u8(packed, x, out), Error);
  x.zero_point = 0;
  out.type = QGemmOutput::Type::UInt8;  // no scales
  EXPECT_THROW(qgemm_s8u8(packed, x, out), Error);
}

}  // namespace
}  // namespace smelt::kernels
