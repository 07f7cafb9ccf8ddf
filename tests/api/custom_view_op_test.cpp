// User-defined view ops (OpDefinition::view): a diagonal and an overlapping sliding window,
// registered with a layout rule. Eager calls share their input's memory and match a loop over
// the input; in-place writes through the view reach the input and its gradient; gradients match
// finite differences; traced graphs print, parse and run; compiled code (fused as index
// arithmetic, at several batch sizes) equals eager bit for bit; and the rules users get wrong
// (not affine, out of bounds, negative strides, wrong arity) are clear errors.
#include <cmath>

#include "support/check.h"
#include "support/errors.h"
#include "smelt/compile.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::same_bits;

// The square matrices' diagonals: (..., n, n) -> (..., n), the last stride s[-2] + s[-1].
OpDefinition diagonal_def(const std::string& name) {
  OpDefinition def;
  def.name = name;
  def.shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
    const Shape& s = in[0].shape;
    SMELT_CHECK(s.size() >= 2 && s[s.size() - 1] == s[s.size() - 2])
        << "diagonal takes square matrices (..., n, n), got " << shape_str(s);
    return std::vector<TensorMeta>{{Shape(s.begin(), s.end() - 1), in[0].dtype}};
  };
  def.view = [](const Shape& in_shape, const Shape& strides, int64_t offset, const Shape&, const Attrs&) {
    const size_t r = in_shape.size();
    StridedLayout l{Shape(strides.begin(), strides.end() - 1), offset};
    l.strides.back() = strides[r - 2] + strides[r - 1];
    return l;
  };
  // d/dx: the gradient on the diagonal, zero elsewhere (smelt ops: it traces and differentiates).
  def.backward = [](const GradContext& c) -> std::vector<Tensor> {
    const int64_t n = c.grads[0].shape().back();
    const Tensor eye = eq(arange(n).unsqueeze(1), arange(n).unsqueeze(0));
    return {where(eye, c.grads[0].unsqueeze(-1), scalar_like(c.grads[0], 0.0))};
  };
  def.backward_reads_inputs = false;  // the shape is enough
  def.backward_reads_outputs = false;
  return def;
}

const CustomOp& diagonal() {
  static const CustomOp op = register_op(diagonal_def("test_diagonal"));
  return op;
}

// Overlapping windows of the last dim: (..., L) -> (..., L - size + 1, size), both new dims
// stepping by the last stride.
const CustomOp& windows() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "test_windows";
    def.shape = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      Shape s = in[0].shape;
      const int64_t size = attrs.get_int("size");
      SMELT_CHECK(!s.empty() && size >= 1 && size <= s.back())
          << "windows of " << size << " over " << shape_str(s);
      s.back() = s.back() - size + 1;
      s.push_back(size);
      return std::vector<TensorMeta>{{s, in[0].dtype}};
    };
    def.view = [](const Shape&, const Shape& strides, int64_t offset, const Shape&, const Attrs&) {
      StridedLayout l{strides, offset};
      l.strides.push_back(strides.back());
      return l;
    };
    // Each window's element t came from input position i + t: the gradient adds up the windows,
    // each shifted into place (cat with zeros), which smelt ops differentiate again.
    def.backward = [](const GradContext& c) -> std::vector<Tensor> {
      const Tensor& g = c.grads[0];
      const int64_t rank = g.dim(), count = g.shape()[size_t(rank - 2)], size = g.shape().back();
      Tensor sum;
      for (int64_t t = 0; t < size; ++t) {
        Tensor column = slice(g, -1, t, t + 1).reshape(Shape(g.shape().begin(), g.shape().end() - 1));
        Shape before = column.shape(), after = column.shape();
        before.back() = t;
        after.back() = size - 1 - t;
        Tensor placed = cat({zeros(before, column.dtype()), column, zeros(after, column.dtype())}, rank - 2);
        sum = sum.defined() ? sum + placed : placed;
      }
      (void)count;
      return {sum};
    };
    def.backward_reads_inputs = false;
    def.backward_reads_outputs = false;
    return register_op(def);
  }();
  return op;
}

// The diagonal by a loop over the input's elements.
Tensor diagonal_reference(const Tensor& x) {
  const Tensor c = x.contiguous().to(DType::Float64);
  const int64_t n = x.shape().back(), batch = x.numel() / std::max<int64_t>(n * n, 1);
  Tensor out = empty({batch, n}, DType::Float64);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) out.data<double>()[b * n + i] = c.data<double>()[(b * n + i) * n + i];
  }
  return out.reshape(Shape(x.shape().begin(), x.shape().end() - 1)).to(x.dtype());
}

TEST(CustomViewOp, EagerViewsShareTheInputsMemoryOfAnyLayout) {
  Tensor x = testing::random_tensor({3, 4, 4}, -2, 2, 1).to(DType::Float32);
  Tensor d = diagonal()({x})[0];
  EXPECT_EQ(d.shape(), (Shape{3, 4}));
  EXPECT_EQ(d.storage(), x.storage());
  EXPECT_EQ(d.strides(), (Shape{16, 5}));
  EXPECT_TRUE(same_bits(d, diagonal_reference(x)));
  // Strided inputs: a permuted one, a slice at an offset, an expanded one (stride 0).
  Tensor permuted = x.permute({0, 2, 1});
  EXPECT_TRUE(same_bits(diagonal()({permuted})[0], diagonal_reference(permuted)));
  Tensor sliced = x.slice(0, 1, 3).slice(1, 0, 4);
  EXPECT_TRUE(same_bits(diagonal()({sliced})[0], diagonal_reference(sliced)));
  EXPECT_EQ(diagonal()({sliced})[0].offset(), 16);
  Tensor expanded = testing::random_tensor({1, 4, 4}, -1, 1, 2).to(DType::Float32).expand({5, 4, 4});
  EXPECT_TRUE(same_bits(diagonal()({expanded})[0], diagonal_reference(expanded)));
  // Edges: empty and size-1 dims, special values, integers.
  EXPECT_EQ(diagonal()({zeros({0, 3, 3})})[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(diagonal()({zeros({2, 0, 0})})[0].shape(), (Shape{2, 0}));
  Tensor one = testing::random_tensor({1, 1}, -1, 1, 3).to(DType::Float32);
  EXPECT_TRUE(same_bits(diagonal()({one})[0], one.reshape({1})));
  Tensor special = testing::special_values({5, 5}, 4);
  EXPECT_TRUE(same_bits(diagonal()({special})[0], diagonal_reference(special)));
  Tensor ints = arange(16).reshape({4, 4});
  EXPECT_TRUE(same_bits(diagonal()({ints})[0], tensor({0, 5, 10, 15}, DType::Int64)));
  // A write into the input shows through the view, and the other way round.
  Tensor y = x.clone();
  Tensor dy = diagonal()({y})[0];
  y.fill_(7.0);
  EXPECT_TRUE(same_bits(dy, full({3, 4}, 7.0)));
  dy.fill_(-1.0);
  EXPECT_EQ(y.sum().item(), 7.0 * 48 - 8.0 * 12);
  // The shape rule refuses what is not square.
  expect_error([&] { diagonal()({zeros({2, 3})}); }, {"test_diagonal", "square matrices"});
}

TEST(CustomViewOp, OverlappingWindowsAreViewsThatRefuseInPlaceWrites) {
  Tensor x = arange(0.0, 6.0, 1.0, DType::Float32);
  Tensor w = windows()({x}, {{"size", 3}})[0];
  EXPECT_EQ(w.shape(), (Shape{4, 3}));
  EXPECT_EQ(w.strides(), (Shape{1, 1}));
  EXPECT_TRUE(same_bits(w.contiguous(), tensor({{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}}, DType::Float32)));
  // Windows of a strided input: every other element of each row.
  Tensor m = arange(0.0, 20.0, 1.0, DType::Float32).reshape({2, 10}).slice(1, 0, 10, 2);
  EXPECT_TRUE(same_bits(windows()({m}, {{"size", 2}})[0].contiguous(),
                        tensor({{{0, 2}, {2, 4}, {4, 6}, {6, 8}}, {{10, 12}, {12, 14}, {14, 16}, {16, 18}}},
                               DType::Float32)));
  // Elements overlap: an in-place op on the view would write one element twice.
  expect_error([&] { w.add_(1.0); }, {"overlap"});
  // The shape rule's limits; a window of the whole row is one window.
  expect_error([&] { windows()({x}, {{"size", 7}}); }, {"test_windows", "windows of 7"});
  EXPECT_EQ(windows()({x}, {{"size", 6}})[0].shape(), (Shape{1, 6}));
}

TEST(CustomViewOp, GradientsMatchFiniteDifferencesToSecondOrder) {
  Tensor x = testing::random_leaf({2, 3, 3}, -1, 1, 11);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return diagonal()({in[0]})[0] * in[0].sum(); }, {x}));
  Tensor v = testing::random_leaf({2, 7}, -1, 1, 12);
  auto f = [](const std::vector<Tensor>& in) {
    Tensor w = windows()({in[0]}, {{"size", 3}})[0];
    return (w * w).sum(std::vector<int64_t>{-1});  // each element used by up to three windows
  };
  EXPECT_TRUE(testing::gradcheck(f, {v}));
  // Second order: the gradient's own gradient, against central differences of the gradient.
  auto grad_of = [&](const Tensor& at, bool create_graph) {
    Tensor leaf = create_graph ? at : at.detach().clone().set_requires_grad();
    return autograd::grad({(f({leaf}) * f({leaf})).sum()}, {leaf}, {}, false, create_graph)[0];
  };
  Tensor weights = testing::random_tensor({2, 7}, 0.5, 1.5, 13);
  Tensor second = autograd::grad({(grad_of(v, true) * weights).sum()}, {v})[0];
  Tensor numeric = zeros({2, 7}, DType::Float64);
  for (int64_t i = 0; i < 14; ++i) {
    const double h = 1e-6;
    Tensor plus = v.detach().clone(), minus = v.detach().clone();
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    numeric.data<double>()[i] =
        ((grad_of(plus, false) * weights).sum().item() - (grad_of(minus, false) * weights).sum().item()) / (2 * h);
  }
  EXPECT_TRUE(all_close(second, numeric, 1e-5, 1e-7));
}

TEST(CustomViewOp, InPlaceWritesThroughTheViewReachTheInputsGradient) {
  // y = x * 3; the diagonal of y doubled in place; loss = sum(y * w). The gradient of x is 3w off
  // the diagonal and 6w on it, as for a built-in view (CopySlices).
  Tensor x = testing::random_leaf({4, 4}, -1, 1, 21);
  Tensor w = testing::random_tensor({4, 4}, 0.5, 1.5, 22);
  Tensor y = x * 3.0;
  Tensor d = diagonal()({y})[0];
  d.mul_(2.0);
  (y * w).sum().backward();
  Tensor expected = w.clone() * 3.0;
  for (int64_t i = 0; i < 4; ++i) expected.data<double>()[i * 5] *= 2.0;
  EXPECT_TRUE(all_close(x.grad(), expected, 1e-12, 1e-12));
  // The view itself carries the new history too: its gradient reaches x through both steps.
  Tensor x2 = testing::random_leaf({3, 3}, -1, 1, 23);
  Tensor y2 = x2 * 1.0;
  Tensor d2 = diagonal()({y2})[0];
  y2.mul_(5.0);  // written through the base: the view is rebuilt from y2's new history
  d2.sum().backward();
  Tensor expected2 = zeros({3, 3}, DType::Float64);
  for (int64_t i = 0; i < 3; ++i) expected2.data<double>()[i * 4] = 5.0;
  EXPECT_TRUE(all_close(x2.grad(), expected2, 1e-12, 1e-12));
}

TEST(CustomViewOp, TracedPrintedParsedAndInterpreted) {
  Tensor x = testing::random_tensor({2, 3, 3}, -1, 1, 31).to(DType::Float32);
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) -> std::vector<Tensor> {
    Tensor w = windows()({diagonal()({in[0] * 2.0})[0]}, {{"size", 2}})[0];
    return {w.exp()};
  };
  Graph g = Graph::trace(fn, {x});
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"mul", "test_diagonal", "test_windows", "exp"}));
  const std::string text = g.print();
  Graph parsed = Graph::parse(text);
  EXPECT_EQ(parsed.print(), text);
  const Tensor eager = fn({x}, {})[0];
  EXPECT_TRUE(same_bits(parsed.run({x})[0], eager));
  g.optimize();
  EXPECT_TRUE(same_bits(g.run({x})[0], eager));
}

TEST(CustomViewOp, CompiledViewsFuseAsIndexArithmeticEqualToEager) {
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor d = diagonal()({in[0] * 2.0 + 1.0})[0];           // of a computed value
    Tensor w = windows()({d}, {{"size", 2}})[0];              // a view of a view, overlapping
    return {(w * diagonal()({in[0]})[0].slice(-1, 1, 4).unsqueeze(-1)).tanh().sum(std::vector<int64_t>{-1}), d};
  };
  for (const char* backend : {"cpp", "interpreter"}) {
    CompileOptions options;
    options.backend = backend;
    CompiledFunction f = compile(fn, options);
    for (int64_t batch : {1, 3, 0, 6}) {
      Tensor x = testing::random_tensor({batch, 4, 4}, -2, 2, uint64_t(40 + batch)).to(DType::Float32);
      const std::vector<Tensor> got = f({x}), want = fn({x});
      EXPECT_TRUE(same_bits(got[0], want[0])) << backend << " batch " << batch;
      EXPECT_TRUE(same_bits(got[1], want[1])) << backend << " batch " << batch;
    }
    EXPECT_EQ(f.report().op_steps, 0) << f.report().plan;  // no step runs the ops on their own
  }
}

TEST(CustomViewOp, ACompiledViewOfAnInputIsTheCallersView) {
  CompiledFunction f = compile([](const std::vector<Tensor>& in) { return diagonal()({in[0]}); });
  Tensor x = testing::random_tensor({5, 5}, -1, 1, 51).to(DType::Float32);
  Tensor d = f({x})[0];
  EXPECT_TRUE(same_bits(d, diagonal_reference(x)));
  EXPECT_EQ(d.storage(), x.storage());  // as eager: a write into x shows through d
}

TEST(CustomViewOp, CompiledTrainingDifferentiatesThroughTheView) {
  Tensor p = testing::random_leaf({4, 4}, -1, 1, 61).to(DType::Float32).detach().set_requires_grad();
  Tensor target = testing::random_tensor({4}, -1, 1, 62).to(DType::Float32);
  auto loss_of = [&](const Tensor& m) {
    Tensor d = diagonal()({m.tanh()})[0];
    return ((d - target) * (d - target)).sum();
  };
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(in[0])}; });
  Tensor leaf = p.detach().clone().set_requires_grad();
  f({leaf})[0].backward();
  Tensor eager_leaf = p.detach().clone().set_requires_grad();
  loss_of(eager_leaf).backward();
  EXPECT_TRUE(all_close(leaf.grad(), eager_leaf.grad(), 1e-6, 1e-6));
  // Off the diagonal nothing flows.
  EXPECT_EQ(leaf.grad().abs().sum().item() - diagonal()({leaf.grad()})[0].abs().sum().item(), 0.0);
}

TEST(CustomViewOp, RulesUsersGetWrongAreClearErrors) {
  auto base = [](const std::string& name, OpViewRule rule) {
    OpDefinition def = diagonal_def(name);
    def.view = std::move(rule);
    return register_op(def);
  };
  // Strides multiplied instead of added: right for some layouts, not affine.
  static const CustomOp product = base("test_view_not_affine", [](const Shape&, const Shape& s, int64_t off, const Shape&, const Attrs&) {
    return StridedLayout{{s[0] * s[1] + s[1]}, off};
  });
  expect_error([] { product({zeros({3, 3})}); }, {"test_view_not_affine", "not affine"});
  // The offset forgotten: wrong at any offset but 0.
  static const CustomOp no_offset = base("test_view_no_offset", [](const Shape&, const Shape& s, int64_t, const Shape&, const Attrs&) {
    return StridedLayout{{s[0] + s[1]}, 0};
  });
  EXPECT_EQ(no_offset({ones({3, 3})})[0].shape(), (Shape{3}));
  expect_error([] { no_offset({ones({4, 3, 3}).slice(0, 1, 2).reshape({3, 3})}); }, {"test_view_no_offset", "in_offset"});
  // Past the input's end, and backwards.
  static const CustomOp past = base("test_view_past_the_end", [](const Shape&, const Shape& s, int64_t off, const Shape&, const Attrs&) {
    return StridedLayout{{s[0] + s[1]}, off + s[1]};
  });
  expect_error([] { past({zeros({3, 3})}); }, {"test_view_past_the_end", "reaches index 3 of input dim 1", "within its input"});
  static const CustomOp backwards = base("test_view_backwards", [](const Shape&, const Shape& s, int64_t off, const Shape&, const Attrs&) {
    return StridedLayout{{-s[0] - s[1]}, off + 2 * (s[0] + s[1])};
  });
  expect_error([] { backwards({zeros({3, 3})}); }, {"test_view_backwards", "non-negative"});
  static const CustomOp rank = base("test_view_rank", [](const Shape&, const Shape& s, int64_t off, const Shape&, const Attrs&) {
    return StridedLayout{s, off};
  });
  expect_error([] { rank({zeros({3, 3})}); }, {"test_view_rank", "returned 2 strides", "shape (3,)"});
  static const CustomOp thrower = base("test_view_throws", [](const Shape&, const Shape&, int64_t, const Shape&, const Attrs&) -> StridedLayout {
    throw std::runtime_error("no layout today");
  });
  expect_error([] { thrower({zeros({3, 3})}); }, {"test_view_throws", "view rule", "no layout today"});
  // Registration: a view computes nothing and has one input and one output.
  OpDefinition with_forward = diagonal_def("test_view_with_forward");
  with_forward.forward = [](const std::vector<Tensor>&, const Attrs&, const std::vector<Tensor>&) {};
  expect_error([&] { register_op(with_forward); }, {"test_view_with_forward", "a view op", "no forward"});
  OpDefinition two_inputs = diagonal_def("test_view_two_inputs");
  two_inputs.num_inputs = 2;
  expect_error([&] { register_op(two_inputs); }, {"test_view_two_inputs", "one input and one output"});
  OpDefinition retyped = diagonal_def("test_view_retyped");
  retyped.shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
    return std::vector<TensorMeta>{{{in[0].shape[0]}, DType::Float64}};
  };
  const CustomOp retyped_op = register_op(retyped);
  expect_error([&] { retyped_op({zeros({3, 3})}); }, {"test_view_retyped", "keeps its input's dtype"});
}

}  // namespace
}  // namespace smelt
