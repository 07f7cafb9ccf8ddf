// The eager softmax, log_softmax and layer_norm run the row kernels (kernels/row_kernels.h): the
// same bits as calling the kernels on the contiguous rows, for inputs read in place (row views
// with a row stride: sliced columns, padded rows, broadcast rows) and for inputs first copied
// (permuted), and for any thread count.
#include <omp.h>

#include <cstring>
#include <vector>

#include "kernels/row_kernels.h"
#include "ops/dispatch.h"
#include "support/check.h"

namespace smelt {
namespace {

// The row kernels over x.contiguous() seen as (rows, cols), written into new vectors.
std::vector<float> kernel_softmax(const Tensor& x, bool log) {
  Tensor c = x.contiguous();
  const int64_t cols = c.dim() == 0 ? 1 : c.size(-1), rows = cols == 0 ? 0 : c.numel() / cols;
  std::vector<float> y(static_cast<size_t>(c.numel()));
  kernels::softmax_rows(c.data<float>(), y.data(), rows, cols, cols, cols, log);
  return y;
}

std::vector<float> values(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<float> v(static_cast<size_t>(c.numel()));
  if (!v.empty()) std::memcpy(v.data(), c.data<float>(), v.size() * sizeof(float));
  return v;
}

// Views of a (6, 1030) float tensor whose rows the eager ops read in place or copy.
std::vector<std::pair<const char*, Tensor>> layouts() {
  Tensor base = normal({6, 1030}, 0.0, 3.0);
  return {
      {"contiguous", base},
      {"columns sliced (row stride 1030)", base.slice(1, 3, 1027)},
      {"rows stepped (row stride 2060)", base.slice(0, 0, 6, 2)},
      {"3-d with collapsible rows", base.reshape({2, 3, 1030}).slice(2, 0, 1000)},
      {"broadcast row (row stride 0)", base.slice(0, 2, 3).expand({5, 1030})},
      {"permuted (copied first)", base.slice(1, 0, 6).permute({1, 0})},
  };
}

TEST(RowOps, SoftmaxMatchesRowKernelsBitwise) {
  for (const auto& [what, x] : layouts()) {
    EXPECT_EQ(values(softmax(x, -1)), kernel_softmax(x, false)) << what;
    EXPECT_EQ(values(log_softmax(x, -1)), kernel_softmax(x, true)) << what;
  }
}

TEST(RowOps, LayerNormMatchesRowKernelsBitwise) {
  for (const auto& [what, x] : layouts()) {
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    Tensor w = normal({cols}, 1.0, 0.5), b = normal({cols}, 0.0, 0.5);
    auto out = ops::call(ops::OpId::layer_norm, {x, w, b}, {{"ndim", int64_t(1)}, {"eps", 1e-5}});
    Tensor c = x.contiguous();
    std::vector<float> y(static_cast<size_t>(c.numel())), mean(static_cast<size_t>(rows)),
        rstd(static_cast<size_t>(rows));
    kernels::layer_norm_rows(c.data<float>(), w.data<float>(), b.data<float>(), y.data(),
                             mean.data(), rstd.data(), rows, cols, cols, cols, 1e-5);
    EXPECT_EQ(values(out[0]), y) << what;
    EXPECT_EQ(values(out[1]), mean) << what;
    EXPECT_EQ(values(out[2]), rstd) << what;
  }
}

// Normalizing over two trailing dims: their rows are 2-d blocks, contiguous or not.
TEST(RowOps, LayerNormOverTwoDimsReadsBlocksInPlaceOrCopies) {
  Tensor base = normal({4, 8, 40}, 1.0, 2.0);
  for (Tensor x : {base, base.slice(0, 0, 4, 2), base.slice(2, 0, 32)}) {
    Tensor w = normal({x.size(1), x.size(2)}, 1.0, 0.5), b = normal({x.size(1), x.size(2)}, 0.0, 0.5);
    Tensor got = layer_norm(x, {x.size(1), x.size(2)}, w, b);
    Tensor want = layer_norm(x.contiguous(), {x.size(1), x.size(2)}, w, b);
    EXPECT_EQ(values(got), values(want)) << shape_str(x.shape());
  }
}

TEST(RowOps, SameBitsForEveryThreadCount) {
  Tensor x = normal({300, 700}, 2.0, 5.0);  // 300 rows: several parallel chunks
  Tensor w = normal({700}, 1.0, 0.5), b = normal({700}, 0.0, 0.5);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> all = values(softmax(x, 1));
    for (float v : values(log_softmax(x, 1))) all.push_back(v);
    for (float v : values(layer_norm(x, {700}, w, b))) all.push_back(v);
    omp_set_num_threads(saved);
    return all;
  };
  const std::vector<float> one = run(1);
  for (int threads : {2, 3, 8}) EXPECT_EQ(run(threads), one) << threads << " threads";
}

}  // namespace
}  // namespace smelt
