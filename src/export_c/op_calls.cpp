// The C of op steps (op_calls.h): each writer below reads the step's operands and attributes as
// the eager kernel does (ops/conv_geometry.h, the pooling window) and writes one call of
// export_c/runtime (gemm.h, conv.h, ops.h) with them as constants. Operands that the plan hands over as strided views
// are first copied into scratch where the C loops want contiguous memory.
#include "export_c/op_calls.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "codegen/lower.h"
#include "ir/graph.h"
#include "kernels/scalar_table.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"
#include "smelt/error.h"

namespace smelt::export_c {
namespace {

using ops::OpId;

// The scratch a GEMM call packs into (runtime/gemm.h smelt_gemm_f32): B's block of at most KC x NC
// and A's of at most MC x KC, each rounded up to whole tiles.
int64_t gemm_scratch_bytes(const GemmTile& t, int64_t m, int64_t n, int64_t k) {
  const int64_t kc = std::min<int64_t>(k, t.kc);
  const int64_t mc = std::min<int64_t>(m, t.mc) + t.mr, nc = std::min<int64_t>(n, t.nc) + t.nr;
  return int64_t(sizeof(float)) * (kc * nc + mc * kc);
}

std::string num(int64_t v) { return std::to_string(v); }

std::string list(const Shape& v, int64_t scale = 1) {
  std::string t;
  for (size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + num(v[i] * scale);
  return t.empty() ? "0" : t;
}

bool contiguous(const Operand& x) { return x.shape.empty() || x.strides == contiguous_strides(x.shape); }

// One call's code and its scratch, handed out in 64-byte aligned pieces.
class Call {
 public:
  explicit Call(std::string scratch) : scratch_(std::move(scratch)) {}

  // A `T*` expression of `bytes` of scratch.
  std::string take(int64_t bytes, const char* type) {
    const std::string p = std::string("((") + type + "*)(" + scratch_ + " + " + num(used_) + "))";
    used_ += (bytes + 63) / 64 * 64;
    return p;
  }

  // `x` as contiguous memory: itself, or a copy into scratch.
  std::string dense(const Operand& x) {
    if (contiguous(x)) return x.ptr;
    const int64_t esize = int64_t(dtype_size(x.dtype));
    const std::string type = kernels::dtype_cpp_type(x.dtype);
    const std::string to = take(shape_numel(x.shape) * esize, type.c_str());
    copy(to, contiguous_strides(x.shape), x.ptr, x.strides, x.shape, esize);
    return to;
  }

  // Copies `shape` elements of `esize` bytes between two strided layouts (strides in elements).
  void copy(const std::string& dst, const Shape& dst_strides, const std::string& src, const Shape& src_strides,
            const Shape& shape, int64_t esize) {
    SMELT_CHECK(shape.size() <= 8) << "export-c: a copy of " << shape.size() << " dims; at most 8";
    code_ << "    {\n      static const int64_t shape[] = {" << list(shape) << "};\n";
    code_ << "      static const int64_t dst_strides[] = {" << list(dst_strides, esize) << "};\n";
    code_ << "      static const int64_t src_strides[] = {" << list(src_strides, esize) << "};\n";
    code_ << "      smelt_copy_strided((unsigned char*)" << dst << ", dst_strides, (const unsigned char*)" << src
          << ", src_strides, shape, " << shape.size() << ", " << esize << ");\n    }\n";
  }

  std::ostringstream& code() { return code_; }
  OpCall done() { return {code_.str(), used_}; }

 private:
  std::string scratch_;
  int64_t used_ = 0;
  std::ostringstream code_;
};

// What a writer gets: the step's operands and attributes, the Call to write into, and the
// statement that fails the run (a bad index).
struct Context {
  const ops::Attrs& attrs;
  const std::vector<Operand>& in;
  const std::vector<Operand>& out;
  Call& call;
  const std::string& fail;
  std::string* why;
  const std::string& epilogue;  // "" or a `const smelt_epilogue*` expression
  const Sink& sink;
};

bool refuse(const Context& c, const std::string& why) {
  *c.why = why;
  return false;
}

bool all_float32(const Context& c) {
  for (const Operand& x : c.in) {
    if (x.dtype != DType::Float32) return refuse(c, std::string("on ") + dtype_name(x.dtype) + " (float32 only)");
  }
  return true;
}

// A constant B (k x n, element (p, j) at p * rs + j * cs) in the blocks smelt_gemm_f32 reads a
// packed B from (runtime/gemm.h): per block of NC columns and KC rows, panels of NR columns.
Tensor pack_b(const Tensor& value, int64_t k, int64_t n, int64_t rs, int64_t cs, const GemmTile& tile) {
  const Tensor b = value.contiguous();
  const float* src = b.data<float>();
  std::vector<float> packed;
  for (int64_t n0 = 0; n0 < n; n0 += tile.nc) {
    const int64_t nc = std::min<int64_t>(tile.nc, n - n0), ncp = (nc + tile.nr - 1) / tile.nr * tile.nr;
    for (int64_t k0 = 0; k0 < k; k0 += tile.kc) {
      const int64_t kc = std::min<int64_t>(tile.kc, k - k0);
      for (int64_t j0 = 0; j0 < ncp; j0 += tile.nr) {
        for (int64_t p = 0; p < kc; ++p) {
          for (int64_t j = 0; j < tile.nr; ++j) {
            const int64_t col = n0 + j0 + j;
            packed.push_back(j0 + j < nc ? src[(k0 + p) * rs + col * cs] : 0.0f);
          }
        }
      }
    }
  }
  return from_vector(packed, {int64_t(packed.size())});
}

// ---- matmul: a batch of GEMMs, the batch dims broadcast; batch dims that b does not have and
// that a and the output walk as more rows are merged into M.
bool matmul(const Context& c) {
  if (!all_float32(c)) return false;
  const Operand &a = c.in[0], &b = c.in[1], &y = c.out[0];
  if (!contiguous(y)) return refuse(c, "into a strided output");
  const bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
  int64_t m = a_vec ? 1 : a.shape[a.shape.size() - 2];
  const int64_t k = a.shape.back(), n = b_vec ? 1 : b.shape.back();
  const int64_t a_rs = a_vec ? 0 : a.strides[a.strides.size() - 2], a_cs = a.strides.back();
  const int64_t b_rs = b_vec ? b.strides[0] : b.strides[b.strides.size() - 2], b_cs = b_vec ? 0 : b.strides.back();
  const size_t batch_dims = y.shape.size() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  // Per batch dim of the output: its size and each operand's stride (0 where broadcast).
  std::vector<int64_t> size(y.shape.begin(), y.shape.begin() + int64_t(batch_dims)), as(batch_dims), bs(batch_dims);
  const Shape y_strides = contiguous_strides(y.shape);
  auto stride_of = [&](const Operand& x, bool vec, size_t d) -> int64_t {
    const size_t own = x.shape.size() - (vec ? 1 : 2);  // x's batch dims, aligned to the right
    if (d + own < batch_dims) return 0;
    const size_t xd = d + own - batch_dims;
    return x.shape[xd] == 1 ? 0 : x.strides[xd];
  };
  for (size_t d = 0; d < batch_dims; ++d) as[d] = stride_of(a, a_vec, d), bs[d] = stride_of(b, b_vec, d);
  while (!size.empty() && !a_vec && bs.back() == 0 && as.back() == m * a_rs) {
    m *= size.back();
    size.pop_back(), as.pop_back(), bs.pop_back();
  }
  int64_t batches = 1;
  for (int64_t s : size) batches *= s;
  const std::string scratch = c.call.take(gemm_scratch_bytes(c.sink.tile, m, n, k), "float");
  std::ostringstream& o = c.call.code();
  // A constant B shared by every batch (a Linear's weight) packed here, once.
  bool b_packed = b.constant.defined() && b.constant.is_contiguous() && !b_vec;
  for (int64_t st : bs) b_packed = b_packed && st == 0;
  const std::string b_data = b_packed ? "(const float*)" + c.sink.constant(pack_b(b.constant, k, n, b_rs, b_cs, c.sink.tile))
                                      : b.ptr;
  o << "    smelt_gemm_b b0 = smelt_matrix_b(" << b_data << ", " << b_rs << ", " << b_cs << ");\n";
  if (b_packed) o << "    b0.packed = 1;\n";
  o << "    for (int64_t t = 0; t < " << batches << "; ++t) {\n      int64_t ao = 0, bo = 0;\n";
  if (!size.empty()) o << "      int64_t rest = t;\n";
  for (size_t d = size.size(); d-- > 0;) {
    o << "      { const int64_t i = rest % " << size[d] << "; rest /= " << size[d] << "; ao += i * " << as[d]
      << "; bo += i * " << bs[d] << "; }\n";
  }
  o << "      smelt_gemm_b bt = b0;\n      bt.data += bo;\n";
  if (!c.epilogue.empty()) {  // the epilogue's rows: the output's flattened (batch, m) rows
    o << "      smelt_epilogue part = *" << c.epilogue << ";\n      part.row_base = t * " << m << ";\n";
  }
  o << "      smelt_gemm_f32(" << m << ", " << n << ", " << k << ", " << a.ptr << " + ao, " << a_rs << ", " << a_cs
    << ", 0, &bt, " << y.ptr << " + t * " << m * n << ", " << n << ", " << scratch << ", "
    << (c.epilogue.empty() ? "0" : "&part") << ");\n    }\n";
  return true;
}

// ---- convolutions
std::string geometry_args(const kernels::Conv2dGeometry& g) {
  return num(g.N) + ", " + num(g.C) + ", " + num(g.H) + ", " + num(g.W) + ", " + num(g.O) + ", " + num(g.kH) + ", " +
         num(g.kW) + ", " + num(g.stride_h) + ", " + num(g.stride_w) + ", " + num(g.pad_h) + ", " + num(g.pad_w) +
         ", " + num(g.dil_h) + ", " + num(g.dil_w) + ", " + num(g.groups) + ", " + num(g.Ho) + ", " + num(g.Wo);
}

// A weight matrix per group (`groups` of rows x cols, row-major, one after the other) in the
// panels smelt_gemm_f32 reads a packed A from (runtime/gemm.h): per block of KC columns, panels
// of MR rows, zero-padded.
Tensor pack_weight(const Tensor& weight, int64_t groups, int64_t rows, int64_t cols, const GemmTile& tile) {
  const int64_t mr = tile.mr, padded = (rows + mr - 1) / mr * mr, kc_max = tile.kc;
  std::vector<float> packed(size_t(groups * padded * cols), 0.0f);
  const Tensor w = weight.contiguous();
  const float* src = w.data<float>();
  for (int64_t g = 0; g < groups; ++g) {
    float* dst = packed.data() + g * padded * cols;
    const float* a = src + g * rows * cols;
    for (int64_t k0 = 0; k0 < cols; k0 += kc_max) {
      const int64_t kc = std::min(kc_max, cols - k0);
      for (int64_t i0 = 0; i0 < padded; i0 += mr) {
        float* panel = dst + k0 * padded + i0 * kc;
        for (int64_t k = 0; k < kc; ++k) {
          for (int64_t i = 0; i < mr && i0 + i < rows; ++i) panel[k * mr + i] = a[(i0 + i) * cols + k0 + k];
        }
      }
    }
  }
  return from_vector(packed, {int64_t(packed.size())});
}

// Winograd's F(2x2, 3x3) weights (runtime/conv.h smelt_conv2d_winograd_f32): per output and input
// channel G g G^T, computed in double, as 16 matrices of o x c (xi-major) packed as GEMM A
// operands, or with `transposed` their transposes (c x o) packed as GEMM B operands.
Tensor winograd_weight(const Tensor& weight, int64_t o, int64_t c, const GemmTile& tile, bool transposed) {
  const Tensor w = weight.contiguous().to(DType::Float64);
  const double* g = w.data<double>();
  std::vector<float> u(size_t(16 * o * c));
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* k = g + (oc * c + ch) * 9;
      double gg[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = k[j];
        gg[1][j] = (k[j] + k[3 + j] + k[6 + j]) / 2;
        gg[2][j] = (k[j] - k[3 + j] + k[6 + j]) / 2;
        gg[3][j] = k[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T
        const double row[4] = {gg[i][0], (gg[i][0] + gg[i][1] + gg[i][2]) / 2, (gg[i][0] - gg[i][1] + gg[i][2]) / 2,
                               gg[i][2]};
        for (int j = 0; j < 4; ++j) u[size_t(((i * 4 + j) * o + oc) * c + ch)] = float(row[j]);
      }
    }
  }
  if (!transposed) return pack_weight(from_vector(u, {16 * o * c}), 16, o, c, tile);
  std::vector<Tensor> packed;  // B (p, j) = u[xi][j][p]: rows c apart along j, columns 1 along p
  for (int64_t xi = 0; xi < 16; ++xi) {
    const std::vector<float> one(u.begin() + xi * o * c, u.begin() + (xi + 1) * o * c);
    packed.push_back(pack_b(from_vector(one, {o * c}), c, o, 1, c, tile));
  }
  return cat(packed, 0);
}

// Winograd for a 3x3 stride-1 convolution of a constant weight with enough channels that its 16
// GEMMs, not its transforms, take the time (as smelt's own choice of oneDNN's Winograd). Also on
// small images: ResNet-18's 7x7 stage measured faster so than by im2col GEMM (22 against 24 ms for
// the model), though each GEMM there reads 16/9 of the weight's bytes for 16 tiles.
bool winograd(const Context& c, const kernels::Conv2dGeometry& g) {
  if (!c.sink.winograd || !c.in[1].constant.defined() || g.kH != 3 || g.kW != 3 || g.stride_h != 1 ||
      g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1 || g.groups != 1 || g.C < 16 || g.O < 16) {
    return false;
  }
  const std::string x = c.call.dense(c.in[0]);
  // Rows of tiles at a time: their transformed inputs and products in about 2 MiB.
  const int64_t tiles_per_row = (g.Wo + 1) / 2, tile_rows = (g.Ho + 1) / 2;
  const int64_t rows = std::clamp<int64_t>((int64_t(1) << 19) / (16 * (g.C + g.O) * tiles_per_row), 1, tile_rows);
  const int64_t chunk = rows * tiles_per_row;
  // The products transposed (tiles as the GEMM's rows) where a chunk's tiles leave fewer rows of
  // MR-row panels empty than columns of NR-column ones: the multiplications the tile wastes.
  const auto padding = [chunk](int64_t panel) { return (chunk + panel - 1) / panel * panel - chunk; };
  const bool transposed = padding(c.sink.tile.mr) < padding(c.sink.tile.nr);
  const std::string u = c.sink.constant(winograd_weight(c.in[1].constant, g.O, g.C, c.sink.tile, transposed));
  // 16 matrices each of transformed inputs and products, their starts apart by
  // runtime/conv.h smelt_winograd_stride (whole 64-byte lines, an odd number of them)
  const auto stride = [](int64_t n) {
    const int64_t lines = (n + 15) / 16;
    return (lines % 2 ? lines : lines + 1) * 16;
  };
  const std::string scratch = c.call.take(int64_t(sizeof(float)) * 16 * (stride(g.C * chunk) + stride(g.O * chunk)) +
                                              (transposed ? gemm_scratch_bytes(c.sink.tile, chunk, g.O, g.C)
                                                          : gemm_scratch_bytes(c.sink.tile, g.O, chunk, g.C)),
                                          "float");
  c.call.code() << "    smelt_conv2d_winograd_f32(" << x << ", (const float*)" << u << ", " << c.out[0].ptr << ", " << g.N
                << ", " << g.C << ", " << g.H << ", " << g.W << ", " << g.O << ", " << g.pad_h << ", " << g.pad_w << ", "
                << g.Ho << ", " << g.Wo << ", " << rows << ", " << int(transposed) << ", " << scratch << ", "
                << (c.epilogue.empty() ? "0" : c.epilogue) << ");\n";
  return true;
}

bool conv2d(const Context& c) {
  if (!all_float32(c)) return false;
  if (!contiguous(c.out[0])) return refuse(c, "into a strided output");
  const kernels::Conv2dGeometry g = ops::conv2d_geometry(c.in[0].shape, c.in[1].shape, c.attrs);
  if (winograd(c, g)) return true;
  const std::string x = c.call.dense(c.in[0]);
  // A constant weight (not depthwise, whose loops read it as it is) packed here, once.
  const bool packed = c.in[1].constant.defined() && g.C / g.groups > 1;
  const std::string w = packed ? c.sink.constant(pack_weight(c.in[1].constant, g.groups, g.O / g.groups,
                                                             g.C / g.groups * g.kH * g.kW, c.sink.tile))
                               : c.call.dense(c.in[1]);
  // depthwise: a block's window (runtime/conv.h SMELT_DW_WINDOW: 16 outputs wide); else the GEMM's panels
  const int64_t window = g.kH * (15 * g.stride_w + (g.kW - 1) * g.dil_w + 1);
  const std::string scratch = c.call.take(
      g.C / g.groups == 1 ? int64_t(sizeof(float)) * window
                          : gemm_scratch_bytes(c.sink.tile, g.O / g.groups, g.Ho * g.Wo, g.C / g.groups * g.kH * g.kW),
      "float");
  c.call.code() << "    smelt_conv2d_f32(" << x << ", (const float*)" << w << ", " << c.out[0].ptr << ", "
                << geometry_args(g) << ", " << packed << ", " << scratch << ", "
                << (c.epilogue.empty() ? "0" : c.epilogue) << ");\n";
  return true;
}

bool conv2d_transpose(const Context& c) {
  if (!all_float32(c)) return false;
  if (!contiguous(c.out[0])) return refuse(c, "into a strided output");
  const kernels::Conv2dGeometry g = ops::conv2d_geometry(c.out[0].shape, c.in[1].shape, c.attrs);
  const std::string dy = c.call.dense(c.in[0]), w = c.call.dense(c.in[1]);
  const int64_t cols = (g.C / g.groups) * g.kH * g.kW * g.Ho * g.Wo;
  const std::string scratch = c.call.take(
      int64_t(sizeof(float)) * (cols + 15) / 16 * 16 + gemm_scratch_bytes(c.sink.tile, cols / (g.Ho * g.Wo), g.Ho * g.Wo, g.O / g.groups),
      "float");
  c.call.code() << "    smelt_conv2d_transpose_f32(" << dy << ", " << w << ", " << c.out[0].ptr << ", " << geometry_args(g)
                << ", " << scratch << ");\n";
  return true;
}

// ---- pooling (window attributes as ops/pool.cpp reads them)
std::string window_args(const Context& c, const char* op) {
  const auto k = ops::pair_attr(c.attrs, "kernel", op, 1), s = ops::pair_attr(c.attrs, "stride", op, 1);
  const auto p = ops::pair_attr(c.attrs, "padding", op, 0);
  const auto d = c.attrs.has("dilation") ? ops::pair_attr(c.attrs, "dilation", op, 1) : std::vector<int64_t>{1, 1};
  return list(k) + ", " + list(s) + ", " + list(p) + ", " + list(d);
}

std::string plane_args(const Context& c) {
  const Shape &x = c.in[0].shape, &y = c.out[0].shape;
  return num(x[0] * x[1]) + ", " + num(x[2]) + ", " + num(x[3]) + ", " + num(y[2]) + ", " + num(y[3]);
}

bool max_pool2d(const Context& c) {
  if (!all_float32(c)) return false;
  const std::string x = c.call.dense(c.in[0]);
  // the indices only where something reads them (the plan marks them unused otherwise)
  const bool indices = c.out.size() > 1 && c.attrs.get_int("indices_unused", 0) == 0;
  const std::string index = indices ? c.out[1].ptr : "(int64_t*)0";
  // without indices a row at a time on scratch: runtime/ops.h smelt_max_pool2d_scratch's floats
  std::string scratch = "(float*)0";  // none: the window-at-a-time loop
  if (!indices) {
    const auto k = ops::pair_attr(c.attrs, "kernel", "max_pool2d", 1);
    const auto s = ops::pair_attr(c.attrs, "stride", "max_pool2d", 1);
    const int64_t dw = c.attrs.has("dilation") ? ops::pair_attr(c.attrs, "dilation", "max_pool2d", 1)[1] : 1;
    const int64_t wp = (c.out[0].shape[3] + 15) / 16 * 16, phase_len = wp + (k[1] - 1) * dw / s[1] + 1;
    // Its rows grow with the stride: one far past the window (a 1-wide output of a huge stride)
    // takes the window-at-a-time loop instead of an arena sized by the stride.
    const int64_t floats = 2 * phase_len * s[1] + wp, row = c.in[0].shape[3] + 2 * (k[1] + dw) + 64;
    if (s[1] <= 8 || floats <= 8 * row) scratch = c.call.take(int64_t(sizeof(float)) * floats, "float");
  }
  c.call.code() << "    smelt_max_pool2d_f32(" << x << ", " << c.out[0].ptr << ", " << index << ", " << plane_args(c)
                << ", " << window_args(c, "max_pool2d") << ", " << scratch << ");\n";
  return true;
}

bool avg_pool2d(const Context& c) {
  if (!all_float32(c)) return false;
  const std::string x = c.call.dense(c.in[0]);
  c.call.code() << "    smelt_avg_pool2d_f32(" << x << ", " << c.out[0].ptr << ", " << plane_args(c) << ", "
                << window_args(c, "avg_pool2d") << ", " << (c.attrs.get_int("count_include_pad") != 0) << ");\n";
  return true;
}

// ---- batch norm with running statistics
bool batch_norm(const Context& c) {
  if (c.attrs.get_int("training") != 0) return refuse(c, "in training mode");
  if (!all_float32(c)) return false;
  std::vector<std::string> in;
  for (const Operand& x : c.in) in.push_back(c.call.dense(x));
  const Shape& s = c.in[0].shape;
  const int64_t spatial = s.size() <= 2 ? 1 : s[0] * s[1] == 0 ? 0 : shape_numel(s) / (s[0] * s[1]);
  std::ostringstream& o = c.call.code();
  o << "    smelt_batch_norm_f32(" << in[0] << ", " << in[1] << ", " << in[2] << ", " << in[3] << ", " << in[4];
  for (size_t k = 0; k < 5; ++k) o << ", " << (k < c.out.size() && !c.out[k].ptr.empty() ? c.out[k].ptr : "(float*)0");
  char eps[40];
  std::snprintf(eps, sizeof eps, "%a", c.attrs.get_float("eps"));  // exact, as smelt reads it
  o << ", " << s[0] << ", " << s[1] << ", " << spatial << ", " << eps << ");\n";
  return true;
}

// ---- indexing and joining (any dtype)
bool gather_rows(const Context& c, const Operand& x, const Operand& index, int64_t dim) {
  if (index.dtype != DType::Int64) return refuse(c, std::string("with ") + dtype_name(index.dtype) + " indices");
  const std::string xs = c.call.dense(x), is = c.call.dense(index);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  if (!contiguous(c.out[0])) return refuse(c, "into a strided output");
  c.call.code() << "    if (smelt_index_select((const unsigned char*)" << xs << ", " << is << ", (unsigned char*)"
                << c.out[0].ptr << ", " << outer << ", " << x.shape[size_t(dim)] << ", " << inner << ", "
                << shape_numel(index.shape) << ", " << dtype_size(x.dtype) << ")) " << c.fail
                << "  /* an index out of range */\n";
  return true;
}

bool index_select(const Context& c) {
  return gather_rows(c, c.in[0], c.in[1], wrap_dim(c.attrs.get_int("dim"), int64_t(c.in[0].shape.size()), "index_select"));
}

bool embedding(const Context& c) { return gather_rows(c, c.in[0], c.in[1], 0); }

bool cat(const Context& c) {
  const Operand& y = c.out[0];
  const int64_t dim = wrap_dim(c.attrs.get_int("dim"), int64_t(y.shape.size()), "cat");
  const int64_t esize = int64_t(dtype_size(y.dtype));
  int64_t at = 0;
  for (const Operand& x : c.in) {
    const std::string dst = "(" + y.ptr + " + " + num(at * y.strides[size_t(dim)]) + ")";
    c.call.copy(dst, y.strides, x.ptr, x.strides, x.shape, esize);
    at += x.shape[size_t(dim)];
  }
  return true;
}

bool copy(const Context& c) {
  c.call.copy(c.out[0].ptr, c.out[0].strides, c.in[0].ptr, c.in[0].strides, c.in[0].shape,
              int64_t(dtype_size(c.in[0].dtype)));
  return true;
}

using CallWriter = std::function<bool(const Context&)>;

const std::map<OpId, CallWriter>& writers() {
  static const std::map<OpId, CallWriter> table = {
      {OpId::matmul, matmul},
      {OpId::conv2d, conv2d},
      {OpId::conv2d_grad_input, conv2d_transpose},
      {OpId::max_pool2d, max_pool2d},
      {OpId::avg_pool2d, avg_pool2d},
      {OpId::batch_norm, batch_norm},
      {OpId::index_select, index_select},
      {OpId::embedding, embedding},
      {OpId::cat, cat},
      {OpId::contiguous, copy},
  };
  return table;
}

// Any other op: lowered alone, as the plan lowers a fusion group (codegen/lower.h), and called
// as a fused kernel; its strided inputs copied dense first (lowered kernels read contiguous
// arguments).
bool lowered(OpId op, const Context& c, const Sink& sink) {
  ir::Graph body;
  std::vector<ir::Value*> inputs;
  for (const Operand& x : c.in) inputs.push_back(body.add_input({x.shape, x.dtype}));
  ir::Node* node = body.add_node(op, inputs, c.attrs);
  for (ir::Value* v : node->outputs) body.add_output(v);
  codegen::LowerResult r = codegen::lower(body, ops::op_name(op));
  if (!r.kernel) return refuse(c, r.reason);
  if (!r.kernel->index_checks.empty()) return refuse(c, "alone: a kernel that checks indices");
  for (const Operand& y : c.out) {
    if (!contiguous(y)) return refuse(c, "into a strided output");
  }
  std::vector<std::string> args;
  for (const Operand& x : c.in) args.push_back(c.call.dense(x));
  for (const Tensor& t : r.constants) args.push_back(sink.constant(t));
  for (const Operand& y : c.out) args.push_back(y.ptr);
  const std::string symbol = sink.kernel(*r.kernel);
  std::ostringstream& o = c.call.code();
  o << "    void* const a[] = {";
  for (size_t i = 0; i < args.size(); ++i) o << (i ? ", " : "") << "(void*)" << args[i];
  o << "};\n    " << symbol << "(a);\n";
  return true;
}

}  // namespace

GemmTile gemm_tile(const std::string& target) {
  if (target == "x86-64-v4") return {8, 32, 128, 96, 512};  // 16 of 32 zmm registers accumulate
  if (target == "x86-64-v3") return {6, 16, 256, 72, 256};  // 12 of 16 ymm
  if (target == "aarch64") return {8, 12, 256, 96, 192};    // 24 of 32 NEON q registers
  return {4, 8, 256, 48, 128};  // generic: small enough for any vector unit or none
}

std::optional<OpCall> op_call(ops::OpId op, const ops::Attrs& attrs, const std::vector<Operand>& in,
                              const std::vector<Operand>& out, const std::string& scratch, const std::string& fail,
                              const Sink& sink, std::string* why, const std::string& epilogue) {
  Call call(scratch);
  const Context context{attrs, in, out, call, fail, why, epilogue, sink};
  if (!epilogue.empty() && op != OpId::matmul && op != OpId::conv2d) return std::nullopt;
  auto found = writers().find(op);
  if (found != writers().end() ? !found->second(context) : !lowered(op, context, sink)) return std::nullopt;
  return call.done();
}

}  // namespace smelt::export_c
