// Views: which ones share storage, their values against index arithmetic, gradients through them.
#include "ops/reference.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::flat_index;
using testing::gradcheck;
using testing::random_leaf;
using testing::tensor_from;

bool shares(const Tensor& a, const Tensor& b) { return a.storage().get() == b.storage().get(); }

// x (3, 4, 5) with value 100 i + 10 j + k: every element names its own position.
Tensor positional() {
  return tensor_from({3, 4, 5}, DType::Float32, [](const Shape& p) { return 100.0 * p[0] + 10.0 * p[1] + p[2]; });
}

TEST(Reshape, ViewWhenPossible) {
  Tensor x = positional();
  Tensor r = x.reshape({12, 5});
  EXPECT_TRUE(shares(r, x));
  EXPECT_EQ(r.to_vector(), x.to_vector());
  EXPECT_TRUE(shares(x.reshape({-1}), x));
  EXPECT_EQ(x.reshape({2, -1, 3}).shape(), (Shape{2, 10, 3}));
  EXPECT_TRUE(x.reshape({3, 4, 5}).same(x));  // the same shape is the tensor itself
  // Slicing the outer dim keeps the inner dims mergeable.
  Tensor s = x.slice(0, 1, 3);
  EXPECT_TRUE(shares(s.reshape({40}), x));
  EXPECT_EQ(s.reshape({40}).to_vector(), s.to_vector());
  // Splitting a strided dim and inserting size-1 dims need no copy either.
  Tensor t = x.transpose(0, 2);  // (5, 4, 3)
  EXPECT_TRUE(shares(t.reshape({5, 2, 2, 3}), x));
  EXPECT_EQ(t.reshape({5, 2, 2, 3}).to_vector(), t.to_vector());
  EXPECT_TRUE(shares(t.reshape({5, 1, 4, 3, 1}), x));
  EXPECT_TRUE(shares(x.view({60}), x));
}

TEST(Reshape, CopiesWhenItMust) {
  Tensor x = positional();
  Tensor t = x.transpose(1, 2);  // (3, 5, 4)
  Tensor r = t.reshape({3, 20});
  EXPECT_FALSE(shares(r, x));
  EXPECT_EQ(r.to_vector(), t.to_vector());
  Tensor sliced = x.slice(2, 0, 5, 2);  // (3, 4, 3), inner dim strided
  EXPECT_EQ(sliced.reshape({36}).to_vector(), sliced.to_vector());
  EXPECT_THROW(t.view({60}), Error);
}

TEST(Reshape, RandomLayoutsRoundTrip) {
  // Any reshape of any view must give the row-major values of that view.
  Generator gen(17);
  Tensor base = arange(0, 240, 1, DType::Float64).reshape({4, 6, 10});
  for (int trial = 0; trial < 40; ++trial) {
    auto r = rand({3}, DType::Float64, &gen).to_vector();
    Shape perm = r[0] < 0.33 ? Shape{0, 1, 2} : (r[0] < 0.66 ? Shape{2, 0, 1} : Shape{1, 2, 0});
    Tensor v = base.slice(2, int64_t(r[1] * 3), 10, 3).slice(0, 0, 4, r[2] < 0.5 ? 2 : 1).permute(perm);
    const int64_t n = v.numel();  // 36, 48, 72 or 96: all divisible by 12
    const std::vector<Shape> targets = {{n}, {2, n / 2}, {n / 2, 2}, {n / 12, 12}, {n / 12, 3, 4},
                                        {3, n / 6, 2}, {1, n, 1}, {2, n / 4, 2}};
    std::vector<double> want = v.contiguous().to_vector();
    for (const Shape& s : targets) {
      Tensor got = v.reshape(s);
      EXPECT_EQ(got.shape(), s);
      EXPECT_EQ(got.to_vector(), want) << shape_str(v.shape()) << " " << shape_str(v.strides()) << " -> "
                                       << shape_str(s);
    }
  }
}

TEST(Permute, ValuesAndSharing) {
  Tensor x = positional();
  Tensor p = x.permute({2, 0, 1});
  EXPECT_TRUE(shares(p, x));
  EXPECT_EQ(p.shape(), (Shape{5, 3, 4}));
  EXPECT_EQ(p.to_vector(), tensor_from({5, 3, 4}, DType::Float32, [](const Shape& q) {
                             return 100.0 * q[1] + 10.0 * q[2] + q[0];
                           }).to_vector());
  EXPECT_EQ(x.permute({-1, 0, 1}).shape(), (Shape{5, 3, 4}));
  EXPECT_EQ(x.transpose(0, -1).shape(), (Shape{5, 4, 3}));
  Tensor m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(m.t().to_vector(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_FALSE(m.t().is_contiguous());
  EXPECT_TRUE(m.t().t().is_contiguous());
}

TEST(Slice, StepsAndPythonBounds) {
  Tensor x = arange(10);
  EXPECT_EQ(x.slice(0, 2, 8, 3).to_vector(), (std::vector<double>{2, 5}));
  EXPECT_EQ(x.slice(0, -3, 10).to_vector(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(x.slice(0, 1, -7).to_vector(), (std::vector<double>{1, 2}));
  EXPECT_EQ(x.slice(0, -100, 2).to_vector(), (std::vector<double>{0, 1}));  // clamped
  EXPECT_EQ(x.slice(0, 8, 100, 5).to_vector(), (std::vector<double>{8}));
  EXPECT_EQ(x.slice(0, 6, 3).numel(), 0);  // empty, not an error
  Tensor p = positional();
  Tensor s = p.slice(1, 1, 4, 2).slice(2, -2, 5);  // (3, 2, 2)
  EXPECT_TRUE(shares(s, p));
  EXPECT_EQ(s.to_vector(), tensor_from({3, 2, 2}, DType::Float32, [](const Shape& q) {
                             return 100.0 * q[0] + 10.0 * (1 + 2 * q[1]) + (3 + q[2]);
                           }).to_vector());
}

TEST(Views, NarrowSelectExpandSqueezeFlatten) {
  Tensor x = positional();
  EXPECT_EQ(x.narrow(1, 1, 2).to_vector(), x.slice(1, 1, 3).to_vector());
  Tensor sel = x.select(2, -1);
  EXPECT_EQ(sel.shape(), (Shape{3, 4}));
  EXPECT_EQ(sel.to_vector()[5], 114);
  EXPECT_TRUE(shares(sel, x));
  Tensor col = from_vector(std::vector<float>{1, 2}, {2, 1});
  Tensor e = col.expand({3, 2, 4});
  EXPECT_TRUE(shares(e, col));
  EXPECT_EQ(e.stride(0), 0);
  EXPECT_EQ(e.stride(2), 0);
  EXPECT_EQ(e.to_vector(), tensor_from({3, 2, 4}, DType::Float32, [](const Shape& q) { return 1.0 + q[1]; }).to_vector());
  EXPECT_EQ(col.expand({-1, 3}).shape(), (Shape{2, 3}));
  Tensor u = x.unsqueeze(1).unsqueeze(-1);
  EXPECT_EQ(u.shape(), (Shape{3, 1, 4, 5, 1}));
  EXPECT_TRUE(shares(u, x));
  EXPECT_EQ(u.squeeze().shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(u.squeeze(1).shape(), (Shape{3, 4, 5, 1}));
  EXPECT_EQ(u.squeeze(0).shape(), u.shape());  // size 3: unchanged
  EXPECT_EQ(x.flatten().shape(), (Shape{60}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{3, 20}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{12, 5}));
  EXPECT_EQ(scalar_tensor(1).flatten().shape(), (Shape{1}));
  EXPECT_EQ(scalar_tensor(1).transpose(0, -1).dim(), 0);  // as PyTorch
}

TEST(Views, ContiguousAndClone) {
  Tensor x = positional();
  EXPECT_TRUE(x.contiguous().same(x));  // already row-major: no copy
  Tensor t = x.transpose(0, 1);
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(shares(c, x));
  EXPECT_EQ(c.to_vector(), t.to_vector());
  Tensor k = x.clone();
  EXPECT_FALSE(shares(k, x));
  EXPECT_EQ(k.to_vector(), x.to_vector());
}

TEST(Views, WritesThroughViewsReachTheBase) {
  Tensor x = zeros({3, 4});
  uint64_t before = x.storage()->version();
  x.slice(1, 0, 4, 2).fill_(1);
  x.select(0, 2).add_(full({4}, 5));
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0, 6, 5, 6, 5}));
  EXPECT_EQ(x.storage()->version(), before + 2);
}

TEST(Views, Gradients) {
  Tensor x = random_leaf({3, 4, 2});
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].reshape({4, 6}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].permute({2, 0, 1}).reshape({2, 12}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].slice(1, -3, 4, 2).slice(0, 0, 3, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].narrow(1, 1, 2) * v[0].select(1, 0).unsqueeze(1); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].select(0, -1).expand({5, 4, 2}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].unsqueeze(0).transpose(0, 3).squeeze(); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].transpose(1, 2).contiguous().flatten(1); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].transpose(0, 1).reshape({-1}); }, {x}));
  // A gradient that flows into the same leaf through two overlapping views.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0].slice(0, 0, 2) * v[0].slice(0, 1, 3); }, {x}));
}

}  // namespace
}  // namespace smelt
