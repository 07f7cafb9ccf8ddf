#include "support/check.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_leaf;

TEST(Autograd, SquareSharedSubexpression) {
  Tensor x = from_vector(std::vector<float>{1, -2, 3}, {3});
  x.set_requires_grad();
  Tensor y = sum(x * x);
  y.backward();
  EXPECT_TRUE(all_close(x.grad(), from_vector(std::vector<float>{2, -4, 6}, {3})));
}

TEST(Autograd, Diamond) {
  // y = a*b + a*c with b = 2a, c = a^2 -> y = 2a^2 + a^3, dy/da = 4a + 3a^2
  Tensor a = from_vector(std::vector<double>{1.5, -0.5}, {2});
  a.set_requires_grad();
  Tensor b = a * 2.0, c = a * a;
  Tensor y = sum(a * b + a * c);
  y.backward();
  EXPECT_TRUE(all_close(a.grad(), from_vector(std::vector<double>{4 * 1.5 + 3 * 2.25, -2 + 0.75}, {2})));
}

TEST(Autograd, BroadcastGradientIsReduced) {
  Tensor a = random_leaf({3, 1}), b = random_leaf({4});
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return v[0] * v[1] + v[1]; }, {a, b}));
}

TEST(Autograd, SecondOrder) {
  Tensor x = from_vector(std::vector<double>{0.3, -1.2}, {2});
  x.set_requires_grad();
  Tensor y = sum(x * x * x);  // dy/dx = 3x^2, d2y/dx2 = 6x
  auto g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
  Tensor g2 = autograd::grad({sum(g[0])}, {x})[0];
  EXPECT_TRUE(all_close(g2, from_vector(std::vector<double>{1.8, -7.2}, {2})));
}

TEST(Autograd, LongChainNoStackOverflow) {
  Tensor x = ones({1});
  x.set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.backward(ones({1}));
  EXPECT_DOUBLE_EQ(x.grad().item(), 1.0);
}

TEST(Autograd, BackwardTwiceIsAnError) {
  Tensor x = random_leaf({3});
  Tensor y = sum(exp(x));
  y.backward();
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NonScalarNeedsGradOutput) {
  Tensor x = random_leaf({3});
  Tensor y = x * 2.0;
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grad_outputs"), std::string::npos) << e.what();
  }
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsAnError) {
  Tensor x = random_leaf({3});
  Tensor y = exp(x);  // saves its output
  Tensor z = sum(y);
  {
    NoGradGuard guard;
    y.mul_(2.0);
  }
  try {
    z.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = random_leaf({3});
  NoGradGuard guard;
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = random_leaf({2});
  Tensor y = x * 3.0;
  int calls = 0;
  y.register_hook([&](const Tensor& g) { ++calls; return g * 2.0; });
  sum(y).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(all_close(x.grad(), full({2}, 6.0, DType::Float64)));
}

TEST(Autograd, LeafGradAccumulates) {
  Tensor x = random_leaf({2});
  sum(x * 2.0).backward();
  sum(x * 3.0).backward();
  EXPECT_TRUE(all_close(x.grad(), full({2}, 5.0, DType::Float64)));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

TEST(Errors, IntegerDivisionByZeroIsAnErrorNotACrash) {
  Tensor a = from_vector(std::vector<int64_t>{4, 5, 6}, {3});
  Tensor b = from_vector(std::vector<int64_t>{2, 0, 3}, {3});
  try {
    div(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
  }
  Tensor ok = div(a, from_vector(std::vector<int64_t>{2, -2, 4}, {3}));
  EXPECT_EQ(ok.to_vector(), (std::vector<double>{2, -2, 1}));
}

}  // namespace
}  // namespace smelt
