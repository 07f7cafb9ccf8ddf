// Tensors: creation, seeded randomness, printing, data access, version counters, alignment.
#include <cmath>
#include <cstdint>
#include <set>

#include "support/check.h"

namespace smelt {
namespace {

using testing::all_close;

TEST(Creation, ConstantsAndRanges) {
  EXPECT_EQ(zeros({2, 2}).to_vector(), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(ones({3}, DType::Int64).to_vector(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(full({2}, 2.5, DType::Float64).to_vector(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(ones({3}, DType::Int64).dtype(), DType::Int64);
  Tensor like = randn({2, 3}, DType::Float64);
  EXPECT_EQ(zeros_like(like).shape(), like.shape());
  EXPECT_EQ(ones_like(like).dtype(), DType::Float64);
  EXPECT_EQ(full_like(like, 7).to_vector()[5], 7);
  Tensor s = scalar_tensor(4.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 4.5);
  EXPECT_EQ(arange(5).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(1, 2, 0.25, DType::Float32).to_vector(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(3, 0, -1).to_vector(), (std::vector<double>{3, 2, 1}));
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_EQ(linspace(0, 1, 5).to_vector(), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(linspace(2, 3, 1).to_vector(), (std::vector<double>{3}));
  EXPECT_EQ(from_vector(std::vector<int64_t>{4, 5}, {2, 1}).shape(), (Shape{2, 1}));
  EXPECT_EQ(from_vector(std::vector<float>{1, 2}, {2}).dtype(), DType::Float32);
  EXPECT_EQ(zeros({0, 4}).numel(), 0);
}

TEST(Creation, FromBlobWrapsWithoutCopy) {
  std::vector<double> host = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(host.data(), {2, 3}, DType::Float64);
  EXPECT_EQ(t.raw_data(), host.data());
  host[4] = 50;
  EXPECT_EQ(t.to_vector()[4], 50);
}

TEST(Random, SeededGeneratorsReproduce) {
  Generator a(42), b(42), c(43);
  Tensor x = randn({100}, DType::Float32, &a), y = randn({100}, DType::Float32, &b);
  Tensor z = randn({100}, DType::Float32, &c);
  EXPECT_EQ(x.to_vector(), y.to_vector());
  EXPECT_NE(x.to_vector(), z.to_vector());
  // The stream moves on: a second draw differs from the first, identically for both.
  EXPECT_NE(randn({100}, DType::Float32, &a).to_vector(), x.to_vector());
  randn({100}, DType::Float32, &b);
  EXPECT_EQ(rand({10}, DType::Float64, &a).to_vector(), (rand({10}, DType::Float64, &b).to_vector()));
  manual_seed(7);
  Tensor d1 = rand({5});
  manual_seed(7);
  EXPECT_EQ(rand({5}).to_vector(), d1.to_vector());
  // Reseeding restarts the stream.
  a.manual_seed(42);
  EXPECT_EQ(randn({100}, DType::Float32, &a).to_vector(), x.to_vector());
}

TEST(Random, Distributions) {
  Generator gen(1);
  std::vector<double> u = uniform({20000}, -2, 3, DType::Float64, &gen).to_vector();
  double mn = 1e9, mx = -1e9, mean = 0;
  for (double v : u) { mn = std::min(mn, v); mx = std::max(mx, v); mean += v / double(u.size()); }
  EXPECT_GE(mn, -2);
  EXPECT_LT(mx, 3);
  EXPECT_NEAR(mean, 0.5, 0.05);
  std::vector<double> n = normal({20000}, 1.0, 2.0, DType::Float64, &gen).to_vector();
  double m = 0, sq = 0;
  for (double v : n) m += v / double(n.size());
  for (double v : n) sq += (v - m) * (v - m) / double(n.size());
  EXPECT_NEAR(m, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq), 2.0, 0.05);
  std::vector<double> ints = randint(-3, 4, {5000}, &gen).to_vector();
  std::set<double> seen(ints.begin(), ints.end());
  EXPECT_EQ(seen, (std::set<double>{-3, -2, -1, 0, 1, 2, 3}));
  std::vector<double> perm = randperm(50, &gen).to_vector();
  std::set<double> all(perm.begin(), perm.end());
  EXPECT_EQ(all.size(), 50u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 49);
}

TEST(Print, ResemblesPyTorch) {
  EXPECT_EQ(from_vector(std::vector<float>{1.5f, -2, 0.25f, 3}, {2, 2}).to_string(),
            "tensor([[ 1.5000, -2.0000],\n        [ 0.2500,  3.0000]])");
  EXPECT_EQ(from_vector(std::vector<float>{1, 2, 3}, {3}).to_string(), "tensor([1., 2., 3.])");
  EXPECT_EQ(arange(5).to_string(), "tensor([0, 1, 2, 3, 4])");
  EXPECT_EQ(scalar_tensor(3.5).to_string(), "tensor(3.5000)");
  EXPECT_EQ(from_vector(std::vector<float>{1e-5f, 1}, {2}).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(from_vector(std::vector<float>{NAN, 1.5f, INFINITY}, {3}).to_string(),
            "tensor([   nan, 1.5000,    inf])");
  EXPECT_EQ(from_vector(std::vector<double>{1.5, 2}, {2}).to_string(), "tensor([1.5000, 2.0000], dtype=float64)");
  EXPECT_EQ(zeros({0, 3}).to_string(), "tensor([], size=(0, 3))");
  Tensor leaf = ones({2});
  leaf.set_requires_grad();
  EXPECT_EQ(leaf.to_string(), "tensor([1., 1.], requires_grad=True)");
  EXPECT_EQ(arange(2000).to_string(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(arange(0, 2000, 1, DType::Float32).reshape({1000, 2}).to_string(),
            "tensor([[   0.,    1.],\n        [   2.,    3.],\n        [   4.,    5.],\n        ...,\n"
            "        [1994., 1995.],\n        [1996., 1997.],\n        [1998., 1999.]])");
  // A view prints its own elements.
  EXPECT_EQ(arange(6).reshape({2, 3}).t().to_string(), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
}

TEST(Data, ItemAndToVector) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.select(1, 2).to_vector(), (std::vector<double>{3, 6}));
  EXPECT_EQ(x.slice(1, 1, 2).select(0, 1).item(), 5);
  EXPECT_EQ(arange(4).slice(0, 3, 4).item<int64_t>(), 3);
  EXPECT_EQ(x.data<double>()[4], 5);
  EXPECT_EQ(x.select(0, 1).data<double>()[0], 4);  // the pointer includes the view's offset
  EXPECT_THROW(x.item(), Error);
  EXPECT_THROW(x.data<float>(), Error);
}

TEST(InPlace, EveryUpdateBumpsTheVersion) {
  Tensor x = zeros({4});
  Tensor view = x.slice(0, 1, 3);
  uint64_t v = x.storage()->version();
  x.fill_(1);
  EXPECT_EQ(x.storage()->version(), v + 1);
  x.zero_();
  EXPECT_EQ(x.storage()->version(), v + 2);
  x.add_(ones({4}), 2.0);
  EXPECT_EQ(x.storage()->version(), v + 3);
  x.mul_(3);
  EXPECT_EQ(x.storage()->version(), v + 4);
  view.copy_(from_vector(std::vector<double>{7, 8}, {2}));  // cast on the way in
  EXPECT_EQ(view.storage()->version(), v + 5);  // views share the counter
  EXPECT_EQ(x.to_vector(), (std::vector<double>{6, 7, 8, 6}));
  x.copy_(scalar_tensor(1));  // broadcast source
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Memory, BuffersAre64ByteAligned) {
  for (int64_t n : {1, 3, 17, 64, 1000, 4097}) {
    for (DType t : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
      Tensor x = empty({n}, t);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(x.storage()->data()) % kTensorAlignment, 0u) << n;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(zeros({n, 2}, t).raw_data()) % 64, 0u);
    }
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>((randn({5, 7}) + 1.0).raw_data()) % 64, 0u);
}

TEST(Detach, SharesDataWithoutHistory) {
  Tensor x = testing::random_leaf({3});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_EQ(d.storage().get(), y.storage().get());
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(std::string(y.grad_fn()->name()), "mul");
}

}  // namespace
}  // namespace smelt
