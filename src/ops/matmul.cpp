// matmul (NumPy semantics) and linear.
//
//   a (..., M, K) @ b (..., K, N) -> (broadcast(...), M, N)
//   a 1-D (K) acts as (1, K) and b 1-D (K) as (K, 1); the promoted dim is dropped from the result.
//
// The kernel never copies operands: every batch entry is one strided kernels::gemm call (the
// stride interface takes transposed, sliced and broadcast operands as they are).
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/loops.h"
#include "ops/contraction_tiles.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

// Below this many flops per matrix, batches run in parallel over matrices (each gemm on one
// thread) instead of one matrix at a time with threads inside gemm.
constexpr double kBatchParallelMaxFlops = 8.0e6;

Shape batch_of(const Shape& s, bool is_vector) {
  return is_vector ? Shape{} : Shape(s.begin(), s.end() - 2);
}

std::vector<TensorMeta> matmul_shape(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta &a = in[0], &b = in[1];
  check_floating(a, "matmul", "a");
  check_same_dtype(a, b, "matmul");
  SMELT_CHECK(!a.shape.empty() && !b.shape.empty())
      << "matmul: operands must have at least 1 dim, got " << shape_str(a.shape) << " and "
      << shape_str(b.shape) << "; use mul for scalars";
  const bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
  const int64_t ka = a.shape.back();
  const int64_t kb = b_vec ? b.shape[0] : b.shape[b.shape.size() - 2];
  SMELT_CHECK(ka == kb) << "matmul: inner dims differ: a " << shape_str(a.shape) << " has K = "
                        << ka << ", b " << shape_str(b.shape) << " has K = " << kb
                        << "; a's last dim must equal b's second-to-last (or only) dim";
  Shape out = broadcast_shapes(batch_of(a.shape, a_vec), batch_of(b.shape, b_vec), "matmul");
  if (!a_vec) out.push_back(a.shape[a.shape.size() - 2]);
  if (!b_vec) out.push_back(b.shape.back());
  return {{out, a.dtype}};
}

// An operand seen as (batch..., rows, cols) with element strides; batch strides are 0 where the
// operand is broadcast.
struct MatrixOperand {
  int64_t rows = 1, cols = 1, rs = 0, cs = 0;
  Shape batch_strides;  // one per dim of the common batch shape
};

MatrixOperand as_matrix(const Tensor& t, bool is_left, const Shape& batch) {
  MatrixOperand m;
  const int64_t r = t.dim();
  if (r == 1) {
    // (K) -> (1, K) on the left, (K, 1) on the right; the unit dim's stride is irrelevant.
    if (is_left) { m.rows = 1; m.cols = t.size(0); m.rs = 0; m.cs = t.stride(0); }
    else { m.rows = t.size(0); m.cols = 1; m.rs = t.stride(0); m.cs = 0; }
  } else {
    m.rows = t.size(r - 2); m.cols = t.size(r - 1);
    m.rs = t.stride(r - 2); m.cs = t.stride(r - 1);
  }
  const int64_t own_batch = std::max<int64_t>(r - 2, 0);
  const int64_t lead = int64_t(batch.size()) - own_batch;
  m.batch_strides.assign(batch.size(), 0);
  for (int64_t d = 0; d < own_batch; ++d) {
    if (t.size(d) != 1) m.batch_strides[size_t(lead + d)] = t.stride(d);
  }
  return m;
}

// The row stride of a's (batch..., M) dims seen as one dim of count * M rows, when b is the same
// matrix for every batch entry (all its batch strides 0) and a's rows are evenly spaced across
// the batch; 0 when they are not. Then the batch is one GEMM instead of `count` small ones: a
// (L, 1, K) @ (K, N) — a sequence-first transformer's projections, exported from PyTorch — was
// L GEMVs that each read all of b (the encoder's QKV projection ran at 67 GFLOP/s, the FFN's
// GEMMs at 118).
int64_t collapsed_row_stride(const MatrixOperand& ma, const MatrixOperand& mb, const Shape& batch) {
  for (int64_t s : mb.batch_strides) {
    if (s != 0) return 0;
  }
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride), outermost first, size-1 dims dropped
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] != 1) dims.push_back({batch[d], ma.batch_strides[d]});
  }
  if (ma.rows != 1) dims.push_back({ma.rows, ma.rs});
  if (dims.empty()) return 0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (dims[i].second != dims[i + 1].second * dims[i + 1].first) return 0;
  }
  return dims.back().second;  // nonzero: a broadcast batch dim (stride 0) fails the test above
}

// `epilogue` (kernels/gemm.h) gets tiles of y seen as the matrix (batch... M, N); a 1-D b (its
// result has no N dim) takes none (contraction_tile_col_dims refuses it).
template <class T>
void matmul_forward(const Tensor& y, const Tensor& a, const Tensor& b, const kernels::GemmEpilogue* epilogue) {
  const Shape batch = broadcast_shapes(batch_of(a.shape(), a.dim() == 1),
                                       batch_of(b.shape(), b.dim() == 1), "matmul");
  const MatrixOperand ma = as_matrix(a, true, batch), mb = as_matrix(b, false, batch);
  const int64_t M = ma.rows, K = ma.cols, N = mb.cols;
  const int64_t count = shape_numel(batch);
  const T* pa = a.strided_data<T>();  // walked by ma's strides
  const T* pb = b.strided_data<T>();
  T* py = y.data<T>();  // (batch..., M, N) contiguous
  if (count > 1 && M * N > 0) {
    if (const int64_t rs = collapsed_row_stride(ma, mb, batch)) {
      kernels::gemm<T>(count * M, N, K, T(1), pa, rs, ma.cs, pb, mb.rs, mb.cs, T(0), py, N, 1, kernels::GemmImpl::Auto,
                       epilogue);
      return;
    }
  }
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      int64_t off_a = 0, off_b = 0, rem = idx;
      for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
        const int64_t i = rem % batch[size_t(d)];
        rem /= batch[size_t(d)];
        off_a += i * ma.batch_strides[size_t(d)];
        off_b += i * mb.batch_strides[size_t(d)];
      }
      const kernels::GemmEpilogueShift shift(epilogue, idx * M);
      kernels::gemm<T>(M, N, K, T(1), pa + off_a, ma.rs, ma.cs, pb + off_b, mb.rs, mb.cs, T(0),
                       py + idx * M * N, N, 1, kernels::GemmImpl::Auto, shift.get());
    }
  };
  const double flops = 2.0 * double(M) * double(N) * double(K);
  if (count > 1 && flops < kBatchParallelMaxFlops) {
    parallel_for(count, std::max<int64_t>(1, int64_t(kBatchParallelMaxFlops / std::max(flops, 1.0))),
                 run);
  } else {
    run(0, count);
  }
}

void matmul_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  SMELT_DISPATCH_FLOATING(in[0].dtype(), "matmul", [&] {
    matmul_forward<scalar_t>(y, in[0], in[1], nullptr);
  });
}

// With a and b promoted to matrices and g to (batch..., M, N):
//   da = g @ b^T,  db = a^T @ g
// then the promoted unit dims are dropped again; the engine sums broadcast batch dims.
std::vector<Tensor> matmul_grad(const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  const Tensor a2 = a_vec ? a.reshape({1, a.size(0)}) : a;
  const Tensor b2 = b_vec ? b.reshape({b.size(0), 1}) : b;
  Shape g_shape = broadcast_shapes(batch_of(a.shape(), a_vec), batch_of(b.shape(), b_vec), "matmul");
  g_shape.push_back(a2.size(-2));
  g_shape.push_back(b2.size(-1));
  const Tensor g = c.grads[0].reshape(g_shape);
  Tensor da, db;
  if (c.needs(0)) {
    da = matmul(g, b2.transpose(-1, -2));
    if (a_vec) da = da.squeeze(-2);
  }
  if (c.needs(1) && !b_vec && b.dim() == 2 && a2.dim() > 2) {
    // A matrix shared by a batch (a Linear layer's weight over (batch, sequence) rows): one GEMM
    // over all rows, (rows, K)^T @ (rows, N), rather than a product per batch entry summed
    // afterwards (a batch-times-larger temporary: 8 MiB for a transformer block's MLP at b8).
    const int64_t k = a2.size(-1), n = g.size(-1);
    db = matmul(a2.reshape({-1, k}).transpose(0, 1), g.reshape({-1, n}));
  } else if (c.needs(1)) {
    db = matmul(a2.transpose(-1, -2), g);
    if (b_vec) db = db.squeeze(-1);
  }
  return {da, db};
}

}  // namespace

SMELT_OP_IMPL(matmul) = {matmul_shape, matmul_kernel, matmul_grad, kSaveInputs};

void matmul_with_epilogue(const Tensor& y, const Tensor& a, const Tensor& b, const kernels::GemmEpilogue& epilogue) {
  SMELT_INTERNAL_CHECK(b.dim() >= 2 && y.is_contiguous()) << "matmul_with_epilogue: a 1-D b or a strided output";
  SMELT_DISPATCH_FLOATING(a.dtype(), "matmul", [&] { matmul_forward<scalar_t>(y, a, b, &epilogue); });
}

}  // namespace smelt::ops

namespace smelt {

Tensor matmul(const Tensor& a, const Tensor& b) { return ops::call1(ops::OpId::matmul, {a, b}); }

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  SMELT_CHECK(x.defined() && w.defined()) << "linear: input and weight must be defined tensors";
  SMELT_CHECK(w.dim() == 2) << "linear: weight must be 2-D (out_features, in_features), got "
                            << shape_str(w.shape());
  SMELT_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1))
      << "linear: input " << shape_str(x.shape()) << " has " << (x.dim() ? x.size(-1) : 0)
      << " features, weight " << shape_str(w.shape()) << " expects in_features = " << w.size(1);
  Tensor y = matmul(x, w.t());
  if (!bias.defined()) return y;
  SMELT_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0))
      << "linear: bias must be (out_features) = (" << w.size(0) << "), got "
      << shape_str(bias.shape());
  return y + bias;
}

}  // namespace smelt
