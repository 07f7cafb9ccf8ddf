// In-place ops under autograd: each program's gradients are compared with the out-of-place
// version of the same program and with central finite differences (float64).
#include "support/check.h"
#include "support/helpers.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using testing::error_of;

using testing::all_close;
using testing::gradcheck;
using testing::random_leaf;
using testing::random_tensor;

using Program = std::function<Tensor(const std::vector<Tensor>&)>;

// Gradients of sum(f(xs) * weights) with respect to xs.
std::vector<Tensor> grads_of(const Program& f, const std::vector<Tensor>& xs) {
  Tensor out = f(xs);
  Tensor weights = random_tensor(out.shape(), 0.5, 1.5, 99);
  return autograd::grad({sum(out * weights)}, xs, {}, false, false, /*allow_unused=*/true);
}

// In-place and out-of-place programs give the same values and gradients (bitwise: both run the
// same ops in the same order), and the in-place one passes gradcheck.
void expect_same_program(const Program& in_place, const Program& out_of_place,
                         const std::vector<Tensor>& xs) {
  EXPECT_TRUE(all_close(in_place(xs), out_of_place(xs), 0, 0));
  std::vector<Tensor> a = grads_of(in_place, xs), b = grads_of(out_of_place, xs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << "input " << i;
    if (a[i].defined()) {
      EXPECT_TRUE(all_close(a[i], b[i], 0, 0)) << "input " << i;
    }
  }
  EXPECT_TRUE(gradcheck(in_place, xs));
}

TEST(InPlace, MulOnNonLeafIsRecorded) {
  // The example: y = w * 2; y.mul_(3); sum(y).backward() gives 6, not 2.
  Tensor w = random_leaf({3});
  Tensor y = w * 2.0;
  y.mul_(3.0);
  sum(y).backward();
  EXPECT_TRUE(all_close(w.grad(), full({3}, 6.0, DType::Float64), 0, 0));
  EXPECT_STREQ(y.grad_fn()->name(), "mul");
}

TEST(InPlace, EveryMethodMatchesItsFunctionalForm) {
  Tensor w = random_leaf({2, 3}, 0.2, 1.0, 1), u = random_leaf({3}, 0.5, 1.5, 2);
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 1.5;
        y.add_(v[1]).add_(v[1], 0.5).add_(2.0).sub_(v[1]).sub_(v[1], 3.0).sub_(0.25);
        y.mul_(v[1]).mul_(1.25).div_(v[1]).div_(4.0).neg_().exp_().clamp_(0.3, 0.9).relu_();
        return y;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 1.5;
        y = y + v[1];
        y = y + v[1] * 0.5;
        y = y + 2.0;
        y = y - v[1];
        y = y - v[1] * 3.0;
        y = y - 0.25;
        y = relu(clamp(exp(neg(div(div(mul(mul(y, v[1]), scalar_like(y, 1.25)), v[1]),
                                   scalar_like(y, 4.0)))),
                       0.3, 0.9));
        return y;
      },
      {w, u});
}

TEST(InPlace, ValueSavedByTheOpItselfIsCopied) {
  // mul saves its inputs; the old y must survive the write of the new one.
  Tensor w = random_leaf({4});
  expect_same_program([](const std::vector<Tensor>& v) { Tensor y = v[0] * 2.0; y.mul_(v[0]); return y; },
                      [](const std::vector<Tensor>& v) { return (v[0] * 2.0) * v[0]; }, {w});
}

TEST(InPlace, SavedTensorModifiedLaterIsAnError) {
  // exp saves its output; changing it afterwards invalidates exp's backward.
  Tensor x = random_leaf({3});
  Tensor y = exp(x);
  y.add_(1.0);
  EXPECT_NE(error_of([&] { sum(y).backward(); }).find("modified in place"), std::string::npos);
}

TEST(InPlace, SameValueUsedTwice) {
  Tensor w = random_leaf({2, 2});
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 3.0;
        y.add_(y);
        y.mul_(y);
        y.sub_(y.t());  // overlaps itself in another layout: reads the old values
        return y;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 3.0;
        y = y + y;
        y = y * y;
        return y - y.t();
      },
      {w});
}

TEST(InPlace, TensorWithTwoConsumers) {
  Tensor w = random_leaf({3});
  // The first consumer saves nothing from y: it keeps the old history.
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 2.0;
        Tensor a = y + 1.0;
        y.mul_(v[0]);
        return a * 3.0 + y;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 2.0;
        Tensor a = y + 1.0;
        return a * 3.0 + y * v[0];
      },
      {w});
  // A consumer that saved y (mul saves its inputs) cannot differentiate after the change.
  Tensor y = w * 2.0;
  Tensor b = y * w;
  y.add_(1.0);
  EXPECT_NE(error_of([&] { sum(b + y).backward(); }).find("modified in place"), std::string::npos);
}

TEST(InPlace, UnderNoGradChangesValuesNotHistory) {
  Tensor w = random_leaf({3});
  Tensor y = w * 2.0;
  {
    NoGradGuard no_grad;
    y.mul_(3.0);
  }
  EXPECT_TRUE(all_close(y, w.detach() * 6.0, 0, 0));
  sum(y).backward();  // y's history is still w * 2
  EXPECT_TRUE(all_close(w.grad(), full({3}, 2.0, DType::Float64), 0, 0));
}

TEST(InPlace, CreateGraphDoubleBackward) {
  Tensor w = random_leaf({3}, 0.5, 1.5, 3);
  auto run = [&](bool in_place) {
    Tensor y = w * w;
    if (in_place) {
      y.mul_(w).add_(w, 2.0);
    } else {
      y = y * w + w * 2.0;
    }
    Tensor g = autograd::grad({sum(y)}, {w}, {}, false, /*create_graph=*/true)[0];
    return std::vector<Tensor>{g, autograd::grad({sum(g * g)}, {w})[0]};
  };
  std::vector<Tensor> a = run(true), b = run(false);
  EXPECT_TRUE(all_close(a[0], b[0], 0, 0));
  EXPECT_TRUE(all_close(a[1], b[1], 0, 0));
  // y = w^3 + 2w: g = 3w^2 + 2; d(sum g^2)/dw = 2 g * 6w
  Tensor wd = w.detach();
  EXPECT_TRUE(all_close(a[1], (wd * wd * 3.0 + 2.0) * wd * 12.0));
}

TEST(InPlace, FillAndCopyGiveTheOldHistoryZeroGradient) {
  Tensor w = random_leaf({2, 3}), u = random_leaf({3}, -1, 1, 5);
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 2.0, z = v[0] * 3.0;
        y.copy_(v[1]);  // broadcast source
        z.slice(1, 0, 1).fill_(4.0);
        return y * v[0] + z;
      },
      [](const std::vector<Tensor>& v) {
        Tensor z = v[0] * 3.0;
        Tensor col = full({2, 1}, 4.0, DType::Float64);
        return v[1].expand({2, 3}) * v[0] + cat({col, z.slice(1, 1, 3)}, 1);
      },
      {w, u});
  Tensor y = w * 2.0;
  y.fill_(1.0);
  EXPECT_TRUE(y.requires_grad());  // still part of the graph: its consumers expect gradients
}

TEST(InPlace, WriteThroughViewChangesTheBase) {
  Tensor w = random_leaf({3, 4}), u = random_leaf({2, 1}, -1, 1, 7);
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 2.0;
        Tensor view = y.slice(0, 1, 3).slice(1, 0, 4, 2);  // rows 1..2, columns 0 and 2
        view.mul_(v[1]);
        return y * y;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 2.0;
        Tensor rows = y.slice(0, 1, 3);
        Tensor even = rows.slice(1, 0, 1) * v[1], odd = rows.slice(1, 1, 2);
        Tensor even2 = rows.slice(1, 2, 3) * v[1], last = rows.slice(1, 3, 4);
        Tensor new_rows = cat({even, odd, even2, last}, 1);
        Tensor z = cat({y.slice(0, 0, 1), new_rows}, 0);
        return z * z;
      },
      {w, u});
}

TEST(InPlace, WriteThroughPermutedAndReshapedViews) {
  Tensor w = random_leaf({2, 3, 2});
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] + 1.0;
        Tensor view = y.permute({2, 0, 1}).select(0, 1).reshape({6});  // y[:, :, 1] flattened
        view.mul_(view);
        view.exp_();
        return y;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] + 1.0;
        Tensor second = y.slice(2, 1, 2);
        return cat({y.slice(2, 0, 1), exp(second * second)}, 2);
      },
      {w});
}

TEST(InPlace, OtherViewsTakeTheNewHistory) {
  // v was made before y changed; it must see the change in values and in gradients.
  Tensor w = random_leaf({4});
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * 1.0;
        Tensor tail = y.slice(0, 1, 4), head = y.slice(0, 0, 2);
        y.mul_(v[0]);       // through the base
        head.add_(v[0].slice(0, 2, 4));  // through another view: tail sees it too
        return tail * 2.0;
      },
      [](const std::vector<Tensor>& v) {
        Tensor y = v[0] * v[0];
        Tensor head = y.slice(0, 0, 2) + v[0].slice(0, 2, 4);
        y = cat({head, y.slice(0, 2, 4)}, 0);
        return y.slice(0, 1, 4) * 2.0;
      },
      {w});
}

TEST(InPlace, ViewOfTensorWithoutGradTakesOperandsHistory) {
  Tensor u = random_leaf({2});
  expect_same_program(
      [](const std::vector<Tensor>& v) {
        Tensor b = zeros({4}, DType::Float64);
        b.slice(0, 1, 3).copy_(v[0]);
        return b * b;
      },
      [](const std::vector<Tensor>& v) {
        Tensor z = zeros({1}, DType::Float64);
        Tensor b = cat({z, v[0], z}, 0);
        return b * b;
      },
      {u});
}

TEST(InPlace, StaleViewAsBackwardRootTakesTheNewHistory) {
  // v was made when b did not require grad; the write through another view changed that.
  Tensor w = random_leaf({2});
  Tensor b = zeros({3}, DType::Float64);
  Tensor v = b.slice(0, 0, 2);
  b.slice(0, 1, 3).copy_(w);
  v.backward(ones({2}, DType::Float64), /*retain_graph=*/true);
  EXPECT_TRUE(all_close(w.grad(), from_vector(std::vector<double>{1, 0}, {2}), 0, 0));
  std::vector<Tensor> g = autograd::grad({sum(v * 3.0)}, {w});
  EXPECT_TRUE(all_close(g[0], from_vector(std::vector<double>{3, 0}, {2}), 0, 0));
}

TEST(InPlace, LeafAndViewsOfLeafAreRefused) {
  Tensor w = random_leaf({3});
  EXPECT_NE(error_of([&] { w.mul_(2.0); }).find("leaf tensor that requires grad"), std::string::npos);
  EXPECT_NE(error_of([&] { w.slice(0, 0, 2).mul_(2.0); }).find("view of a leaf"), std::string::npos);
  NoGradGuard no_grad;
  w.slice(0, 0, 2).mul_(2.0);  // fine without grad mode
}

TEST(InPlace, ViewMadeUnderNoGradIsRefused) {
  Tensor w = random_leaf({3});
  Tensor y = w * 2.0;
  Tensor v;
  {
    NoGradGuard no_grad;
    v = y.slice(0, 0, 2);
  }
  EXPECT_NE(error_of([&] { v.mul_(2.0); }).find("made under no_grad"), std::string::npos);
}

TEST(InPlace, ResultMustFitTheWrittenTensor) {
  Tensor x = zeros({1, 3}, DType::Float64);
  EXPECT_NE(error_of([&] { x.add_(ones({2, 3}, DType::Float64)); }).find("does not broadcast"),
            std::string::npos);
  EXPECT_NE(error_of([&] { x.copy_(ones({2}, DType::Float64)); }).find("copy_"), std::string::npos);
}

TEST(InPlace, TracingRefusesSymbolicWritesAndRunsConcreteOnesEagerly) {
  Tensor x = random_tensor({3});
  auto symbolic_target = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor h = in[0] * 2.0;
    h.mul_(3.0);
    return std::vector<Tensor>{h};
  };
  EXPECT_NE(error_of([&] { trace::trace(symbolic_target, {x}, {}); }).find("cannot be traced"),
            std::string::npos);
  Tensor counter = zeros({1}, DType::Float64);
  auto symbolic_operand = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    counter.add_(sum(in[0]).reshape({1}));
    return std::vector<Tensor>{in[0] * 2.0};
  };
  EXPECT_NE(error_of([&] { trace::trace(symbolic_operand, {x}, {}); }).find("symbolic"),
            std::string::npos);
  Tensor c2 = zeros({1}, DType::Float64);
  auto eager_only = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    c2.add_(1.0);
    c2.fill_(5.0);
    return std::vector<Tensor>{in[0] * 2.0};
  };
  trace::trace(eager_only, {x}, {});
  EXPECT_EQ(c2.item(), 5.0);
}

}  // namespace
}  // namespace smelt
