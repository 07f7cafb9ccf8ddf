// The integer GEMM of quantized inference (docs/quantization.md): uint8 activations times int8
// weights, accumulated exactly in int32, then requantized in the same pass.
//
//   acc[m][n] = sum_k (A[m][k] - za) * (B[k][n] - zb[n])  (+ bias[n], an int32 in acc's scale)
//   out[m][n] = acc                                              (Int32)
//             = float(acc) * scale[n]                            (Float32: dequantized)
//             = clamp(round_half_even(float(acc) * scale[n]) + zo, lo, hi)  (UInt8 / Int8)
//
// The products run on A and B as stored (A - za and B - zb need 9 bits); the zero points come
// back as row and column sums: acc = A.B - za * colsum(B) - zb[n] * rowsum(A) + K * za * zb[n].
//
// Instruction sets, chosen at run time from the CPU (qgemm_best_isa), so that one build runs on
// every x86-64: AVX-512 VNNI (vpdpbusd: four u8 x s8 products summed into each int32 lane, no
// intermediate saturation), AVX2 (vpmaddwd on operands widened to int16: exact — vpmaddubsw's
// int16 pair sums saturate at 32767 < 2 * 255 * 127, which is why it is not used), and portable
// C++ (any CPU). All three give the same int32 bits; the float epilogue is one scalar formula.
// B is packed once per weight for one instruction set (QPackedB).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace smelt::kernels {

// Amx (Intel's tile matrix unit, TDPBSUD: 16 x 16 x 64 products per instruction) runs only the
// weights-on-the-left GEMM (qgemm_s8u8, the convolutions); it needs the OS to grant the process
// its tile state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), asked for once by qgemm_isa_supported.
enum class QGemmIsa : uint8_t { Portable, Avx2, Avx512Vnni, Amx };

const char* qgemm_isa_name(QGemmIsa isa);  // "portable", "avx2", "avx512-vnni", "amx-int8"
bool qgemm_isa_supported(QGemmIsa isa);     // by this CPU (and, for Amx, this OS)
// The fastest supported one for qgemm_u8s8 / for qgemm_s8u8. SMELT_QGEMM_ISA=<name> chooses
// another for the GEMMs that have a kernel for it (to compare them, or to keep a tool that cannot
// run AMX, such as valgrind, working); a name this CPU cannot run is an error.
QGemmIsa qgemm_best_isa();
QGemmIsa qgemm_s8u8_best_isa();
// Whether the int8 paths around the GEMMs (requantizing stores, phase frames, depthwise) use
// AVX-512 (F, BW, VL): when the CPU has it, unless SMELT_QGEMM_ISA names avx2 or portable, which
// then stand for a CPU without AVX-512 throughout.
bool qgemm_vector_avx512();

// B (K x N) packed for one instruction set: panels of `nr` columns, k in groups of `group`
// (zero-padded), as the micro-kernel loads them; the zero point per column and the column sums.
struct QPackedB {
  QGemmIsa isa = QGemmIsa::Portable;
  int64_t k = 0, n = 0;
  int nr = 0, group = 0;
  int64_t k_groups = 0;            // ceil(k / group)
  std::vector<int8_t> bytes;       // Portable, Avx512Vnni: [panel][k group][nr][group]
  std::vector<int16_t> words;      // Avx2: the same layout, widened
  std::vector<int32_t> col_sums;   // sum_k B[k][n], as stored (signed)
  std::vector<int32_t> zero_point; // per column, in the stored (signed) domain
};

// Packs B: element (k, n) is at b[k * stride_k + n * stride_n] (a conv weight (N, K) is
// stride_k = 1, stride_n = K). `b_unsigned`: the values are uint8 (ONNX allows either); they are
// stored as int8 minus 128, with the zero points shifted the same, which changes no product
// (b - zb is unchanged). `zero_points` has n values (per column) or one.
QPackedB qgemm_pack_b(const void* b, bool b_unsigned, int64_t k, int64_t n, int64_t stride_k,
                      int64_t stride_n, const std::vector<int32_t>& zero_points, QGemmIsa isa);

struct QGemmOutput {
  enum class Type : uint8_t { Int32, Float32, UInt8, Int8 };
  Type type = Type::Int32;
  void* data = nullptr;
  int64_t ldc = 0;                  // elements between rows of the output
  const int32_t* bias = nullptr;    // per column, added to acc (optional)
  const float* scale = nullptr;     // per column when per_column_scale, else one value
  bool per_column_scale = false;
  const float* row_scale = nullptr; // optional, per row: the scale is row_scale[m] * scale[n]
  int32_t zero_point = 0;           // UInt8 / Int8
  // UInt8 / Int8: the stored value is also clamped to [lo, hi] (a fused ReLU: lo = zero_point);
  // the type's own range always applies.
  int32_t lo = std::numeric_limits<int32_t>::min();
  int32_t hi = std::numeric_limits<int32_t>::max();
};

// A: m rows of b.k uint8 values, `lda` apart; its zero point per row (m values) or one, each in
// [0, 255].
struct QGemmA {
  const uint8_t* data = nullptr;
  int64_t lda = 0;
  const int32_t* zero_points = nullptr;
  bool per_row = false;
};

// out = requantize((A - za)(B - zb)). Threads over tiles of the output.
void qgemm_u8s8(int64_t m, const QGemmA& a, const QPackedB& b, const QGemmOutput& out);
// The same with one zero point for A.
void qgemm_u8s8(int64_t m, const uint8_t* a, int64_t lda, int32_t a_zero_point,
                const QPackedB& b, const QGemmOutput& out);

// ---- The other orientation, for convolutions over NCHW images (kernels/qconv.cpp):
//   acc[m][n] = sum_k (W[m][k] - zw[m]) * (X[k][n] - zx)  (+ bias[m])
// W (M x K int8 weights, an output channel per row) is the broadcast operand, packed once; X
// (K x N uint8 activations, a pixel per column) the vector operand, packed per call from K row
// pointers, so an image's rows (a padded channel, or its im2col rows) are read in place.
// vpdpbusd takes the unsigned operand as its vector, so the weights keep their sign and, with
// zero points 0 (symmetric weights), X needs no column sums.

// W packed for one instruction set: [row tile][k group][mr] int32 words, each holding one row's
// `group` values (4 int8, or 2 int16 on AVX2), zero past k and past m; per-row sums and zero
// points in the stored (signed) domain. Amx: a row tile is two AMX tiles of 16 rows, k_groups is
// padded to whole blocks of at most 16 groups (qtiles::amx_block: blocks of one size, as few as
// fit; zeros past k), and per block each tile's 16 rows lie row after row (the layout TILELOADD
// reads): [row tile][k block][half][row][k group].
struct QPackedW {
  QGemmIsa isa = QGemmIsa::Portable;
  int64_t m = 0, k = 0;
  int mr = 0, group = 0;
  int64_t k_groups = 0;
  std::vector<int32_t> words;
  std::vector<int32_t> row_sums, zero_point;
  bool any_zero_point = false;
};

// Element (m, k) at w[m * ldw + k]; `w_unsigned` as qgemm_pack_b's `b_unsigned`; `zero_points`
// has m values or one.
QPackedW qgemm_pack_w(const void* w, bool w_unsigned, int64_t m, int64_t k, int64_t ldw,
                      const std::vector<int32_t>& zero_points, QGemmIsa isa);

// X: row k is rows[k][0, n). `flip_sign`: the bytes are int8, read as uint8 by +128 (the zero
// point given already shifted, in [0, 255]).
struct QGemmX {
  const uint8_t* const* rows = nullptr;
  int64_t n = 0;
  int32_t zero_point = 0;
  bool flip_sign = false;
};

// Requantized per row (output channel). Column n is stored at `data + row * ldc + n`, unless
// `padded_width` > 0: then the columns are an image `padded_width` wide of which the first
// `width` of each row are kept, column n going to (n / padded_width) * width + n % padded_width.
struct QGemmRowOutput {
  QGemmOutput::Type type = QGemmOutput::Type::Int32;  // Int32, UInt8 or Int8
  void* data = nullptr;
  int64_t ldc = 0;
  const int32_t* bias = nullptr;  // per row, optional
  const float* scale = nullptr;   // per row (UInt8 / Int8)
  int32_t zero_point = 0;
  int32_t lo = std::numeric_limits<int32_t>::min();
  int32_t hi = std::numeric_limits<int32_t>::max();
  int64_t padded_width = 0, width = 0;
};

// out = requantize((W - zw)(X - zx)). Threads over panels of columns (and row chunks when there
// are few panels); each task packs its panel of X once.
void qgemm_s8u8(const QPackedW& w, const QGemmX& x, const QGemmRowOutput& out);

// The requantization of one accumulator, as every path stores it (round half to even).
int32_t requantize_one(int32_t acc, float scale, int32_t zero_point, int32_t lo, int32_t hi);

}  // namespace smelt::kernels
