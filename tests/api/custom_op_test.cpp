// User-defined ops (smelt/custom_op.h): eager calls against a scalar loop, gradients against
// finite differences (first and second order), traced graphs and the IR text, smelt::compile with
// and without an expression (against eager, bit for bit where the same kernel runs), the errors
// users make, and apply_function (hand-written gradients). ONNX import of a custom domain:
// tests/onnx/onnx_custom_op_test.cpp. Ops registered here live for the whole test binary, so each
// test registers its own names, once.
#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <thread>

#include "support/check.h"
#include "support/errors.h"
#include "smelt/compile.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::same_bits;

// y = a * tanh(b) + 1 (a and b of one shape), computed by a loop in double and rounded once.
void gated_tanh_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const Tensor a = in[0].contiguous().to(DType::Float64), b = in[1].contiguous().to(DType::Float64);
  const double shift = attrs.get_float("shift", 1.0);
  Tensor y = empty(a.shape(), DType::Float64);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<double>()[i] = a.data<double>()[i] * std::tanh(b.data<double>()[i]) + shift;
  Tensor target = out[0];
  NoGradGuard no_grad;
  target.copy_(y);
}

std::vector<Tensor> gated_tanh_backward(const GradContext& c) {
  const Tensor t = tanh(c.inputs[1]);
  return {c.grads[0] * t, c.grads[0] * c.inputs[0] * (1.0 - t * t)};
}

OpDefinition gated_tanh_def(const std::string& name) {
  OpDefinition def;
  def.name = name;
  def.num_inputs = 2;
  def.shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
    SMELT_CHECK(in[0] == in[1]) << "a and b differ";
    return std::vector<TensorMeta>{in[0]};
  };
  def.forward = gated_tanh_kernel;
  def.backward = gated_tanh_backward;
  def.backward_reads_outputs = false;
  return def;
}

// Registered once per binary.
const CustomOp& gated_tanh() {
  static const CustomOp op = register_op(gated_tanh_def("test_gated_tanh"));
  return op;
}

const CustomOp& gated_tanh_with_expression() {
  static const CustomOp op = [] {
    OpDefinition def = gated_tanh_def("test_gated_tanh_expr");
    def.expression = [](const std::vector<Tensor>& in, const Attrs& attrs) -> std::vector<Tensor> {
      return {in[0] * tanh(in[1]) + attrs.get_float("shift", 1.0)};
    };
    return register_op(def);
  }();
  return op;
}

Tensor reference(const Tensor& a, const Tensor& b, double shift = 1.0) {
  const Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64);
  return (a64 * tanh(b64) + shift).to(a.dtype());
}

TEST(CustomOp, EagerCallMatchesTheFormula) {
  Tensor a = testing::random_tensor({3, 5}, -2, 2, 1).to(DType::Float32);
  Tensor b = testing::random_tensor({3, 5}, -2, 2, 2).to(DType::Float32);
  EXPECT_TRUE(same_bits(gated_tanh()({a, b})[0], reference(a, b)));
  EXPECT_TRUE(same_bits(call_op("test_gated_tanh", {a, b}, {{"shift", 0.5}})[0], reference(a, b, 0.5)));
  // Views in any layout: the kernel's contiguous() reads them.
  Tensor at = testing::random_tensor({5, 3}, -2, 2, 3).to(DType::Float32).t();
  EXPECT_TRUE(same_bits(gated_tanh()({at, b})[0], reference(at, b)));
  // Edges: empty, NaN and infinities pass through the kernel as the formula says.
  EXPECT_EQ(gated_tanh()({zeros({0, 4}), zeros({0, 4})})[0].shape(), (Shape{0, 4}));
  Tensor special = testing::special_values({4, 7}, 5);
  EXPECT_TRUE(same_bits(gated_tanh()({special, special})[0], reference(special, special)));
  EXPECT_TRUE(find_op("test_gated_tanh").name() == "test_gated_tanh");
  EXPECT_TRUE(is_registered_op("test_gated_tanh"));
  EXPECT_FALSE(is_registered_op("test_no_such_op"));
}

TEST(CustomOp, GradientsMatchFiniteDifferencesToSecondOrder) {
  Tensor a = testing::random_leaf({4, 3}, -1, 1, 11), b = testing::random_leaf({4, 3}, -1, 1, 12);
  auto f = [](const std::vector<Tensor>& in) { return gated_tanh()({in[0], in[1]})[0]; };
  EXPECT_TRUE(testing::gradcheck(f, {a, b}));
  // The gradient is itself built from smelt ops: differentiate it again (d/db of the gradient
  // for a, weighted) and compare with central differences of that gradient.
  auto grad_a = [](const Tensor& a0, const Tensor& b0, bool create_graph) {
    Tensor leaf = a0.detach().clone().set_requires_grad();
    Tensor y = gated_tanh()({leaf, b0})[0];
    return autograd::grad({(y * y).sum()}, {leaf}, {}, false, create_graph)[0];
  };
  Tensor w = testing::random_tensor({4, 3}, 0.5, 1.5, 14);
  Tensor second = autograd::grad({(grad_a(a, b, true) * w).sum()}, {b})[0];
  Tensor numeric = zeros({4, 3}, DType::Float64);
  for (int64_t i = 0; i < 12; ++i) {
    const double h = 1e-6;
    Tensor plus = b.detach().clone(), minus = b.detach().clone();
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    numeric.data<double>()[i] =
        ((grad_a(a, plus, false) * w).sum().item() - (grad_a(a, minus, false) * w).sum().item()) / (2 * h);
  }
  EXPECT_TRUE(all_close(second, numeric, 1e-5, 1e-7));
  // backward() into leaves, as for built-ins.
  Tensor c = testing::random_tensor({4, 3}, -1, 1, 13);
  gated_tanh()({a, c})[0].sum().backward();
  EXPECT_TRUE(all_close(a.grad(), tanh(c), 1e-12, 1e-12));
}

TEST(CustomOp, TensorsTheBackwardDoesNotReadArriveAsStandIns) {
  // backward_reads_outputs false: ctx.outputs still has one stand-in per output (shape and dtype).
  static const CustomOp op = [] {
    OpDefinition def = gated_tanh_def("test_stand_ins");
    def.backward = [](const GradContext& c) -> std::vector<Tensor> {
      SMELT_CHECK(c.outputs.size() == 1 && c.outputs[0].shape() == c.inputs[0].shape()) << "no stand-in";
      return gated_tanh_backward(c);
    };
    return register_op(def);
  }();
  Tensor a = testing::random_leaf({2, 5}, -1, 1, 15), b = testing::random_leaf({2, 5}, -1, 1, 16);
  op({a, b})[0].sum().backward();
  EXPECT_TRUE(all_close(a.grad(), tanh(b.detach()), 1e-12, 1e-12));
}

TEST(CustomOp, TracedPrintedParsedAndInterpreted) {
  Tensor a = testing::random_tensor({2, 3}, -1, 1, 21), b = testing::random_tensor({2, 3}, -1, 1, 22);
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {gated_tanh()({in[0] * 2.0, in[1]}, {{"shift", -3.0}})[0].exp()};
  };
  Graph g = Graph::trace(fn, {a, b});
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"mul", "test_gated_tanh", "exp"}));
  const std::string text = g.print();
  EXPECT_NE(text.find("test_gated_tanh(%"), std::string::npos) << text;
  EXPECT_NE(text.find("shift=-3."), std::string::npos) << text;
  Graph parsed = Graph::parse(text);
  EXPECT_EQ(parsed.print(), text);
  const Tensor eager = fn({a, b}, {})[0];
  EXPECT_TRUE(same_bits(parsed.run({a, b})[0], eager));
  g.optimize();  // no expression: the node stays, an opaque op the passes leave alone
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"mul", "test_gated_tanh", "exp"}));
  EXPECT_TRUE(same_bits(g.run({a, b})[0], eager));
  // A parse of an op nobody registered says how to fix it.
  expect_error([] { Graph::parse("graph(%x: f32[2]) {\n  %y: f32[2] = test_unregistered(%x)\n  return %y\n}\n"); },
               {"unknown op 'test_unregistered'", "register_op"});
}

TEST(CustomOp, CompiledWithoutExpressionIsAnOpStepEqualToEager) {
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor y = gated_tanh()({relu(in[0]), in[1]})[0];
    return {y * 3.0 + in[0]};
  };
  CompiledFunction f = compile(fn);
  for (int64_t rows : {1, 4, 9}) {
    Tensor a = testing::random_tensor({rows, 6}, -2, 2, uint64_t(rows)).to(DType::Float32);
    Tensor b = testing::random_tensor({rows, 6}, -2, 2, uint64_t(rows) + 50).to(DType::Float32);
    EXPECT_TRUE(same_bits(f({a, b})[0], fn({a, b})[0])) << rows;
  }
  EXPECT_GE(f.report().op_steps, 1);  // the custom op runs its own kernel
  EXPECT_NE(f.report().plan.find("test_gated_tanh"), std::string::npos) << f.report().plan;
}

TEST(CustomOp, ExpressionIsInlinedAndFused) {
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {gated_tanh_with_expression()({in[0] + 1.0, in[1]}, {{"shift", 0.25}})[0] * 2.0};
  };
  auto written_out = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {((in[0] + 1.0) * tanh(in[1]) + 0.25) * 2.0};
  };
  CompiledFunction f = compile(fn), g = compile(written_out);
  Tensor a = testing::random_tensor({8, 33}, -2, 2, 31).to(DType::Float32);
  Tensor b = testing::random_tensor({8, 33}, -2, 2, 32).to(DType::Float32);
  // The same ops as the expression written out by hand: the same plan, the same bits.
  EXPECT_TRUE(same_bits(f({a, b})[0], g({a, b})[0]));
  EXPECT_EQ(f.report().kernels, 1);
  EXPECT_EQ(f.report().op_steps, 0);
  // And the eager kernel agrees with the expression (within rounding: it computes in double).
  EXPECT_TRUE(all_close(f({a, b})[0], fn({a, b})[0], 1e-6, 1e-6));
  // The optimized graph holds built-in ops only.
  Graph traced = Graph::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); }, {a, b});
  EXPECT_EQ(traced.op_names()[1], "test_gated_tanh_expr");
  traced.optimize();
  for (const std::string& op : traced.op_names()) EXPECT_NE(op, "test_gated_tanh_expr");
}

TEST(CustomOp, AnExpressionAloneComputesEagerlyToo) {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "test_expression_only";
    def.expression = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<Tensor> {
      return {in[0] * sigmoid(in[0])};
    };
    return register_op(def);
  }();
  Tensor x = testing::random_tensor({7}, -3, 3, 41).to(DType::Float32);
  EXPECT_TRUE(same_bits(op({x})[0], x * sigmoid(x)));
  // Not differentiable without a backward: an error naming the op, only when a gradient flows.
  Tensor leaf = testing::random_leaf({3});
  Tensor y = op({leaf})[0];
  expect_error([&] { y.sum().backward(); }, {"test_expression_only", "has no backward"});
}

TEST(CustomOp, CompiledTrainingStepRunsTheBackward) {
  // A training step through the op: its backward (the only gradient the op has) is traced into the
  // step's plan, and 3 SGD steps equal eager's.
  auto make = [] {
    manual_seed(21);
    return std::make_shared<nn::Linear>(4, 3, true, DType::Float64);
  };
  auto eager = make(), model = make();
  const Tensor gate = testing::random_tensor({5, 3}, -1, 1, 53);
  auto loss = [&](nn::Linear& m, const Tensor& x) { return (gated_tanh()({m.forward(x), gate})[0] * 0.5).sum(); };
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions{0.1}), opt(model->parameters(), optim::SGDOptions{0.1});
  CompiledFunction step = compile_step(*model, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{loss(*model, in[0])};
  }, opt);
  for (int s = 0; s < 3; ++s) {
    Tensor x = testing::random_tensor({5, 4}, -1, 1, uint64_t(60 + s));
    opt_e.zero_grad();
    Tensor want = loss(*eager, x);
    want.backward();
    opt_e.step();
    EXPECT_TRUE(all_close(step({x})[0], want.detach(), 1e-12, 1e-12)) << s;
  }
  EXPECT_TRUE(all_close(model->weight, eager->weight, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(model->bias, eager->bias, 1e-12, 1e-12));
}

TEST(CustomOp, AnUnusedCallStillRaisesWhenCompiled) {
  // A validation op: compiled, its call is kept although nothing reads it, so it raises as eagerly.
  static const CustomOp check_positive = [] {
    OpDefinition def;
    def.name = "test_check_positive";
    def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
      SMELT_CHECK(in[0].min().item() > 0) << "a value is not positive";
      Tensor target = out[0];
      target.copy_(in[0]);
    };
    return register_op(def);
  }();
  CompiledFunction f = compile([](const std::vector<Tensor>& in) {
    check_positive({in[0]});
    return std::vector<Tensor>{in[0] * 2.0};
  });
  EXPECT_TRUE(same_bits(f({full({3}, 1.0)})[0], full({3}, 2.0)));
  expect_error([&] { f({full({3}, -1.0)}); }, {"test_check_positive", "not positive"});
}

TEST(CustomOp, AnExpressionThatCapturesATensorIsRefused) {
  static Tensor scale = full({3}, 2.0);
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "test_expression_captures";
    def.expression = [](const std::vector<Tensor>& in, const Attrs&) { return std::vector<Tensor>{in[0] * scale}; };
    return register_op(def);
  }();
  Tensor x = full({3}, 1.5);
  EXPECT_TRUE(same_bits(op({x})[0], full({3}, 3.0)));  // eagerly it reads scale now
  CompiledFunction f = compile([](const std::vector<Tensor>& in) { return op({in[0]}); });
  expect_error([&] { f({x}); }, {"test_expression_captures", "captured from outside", "as an input"});
}

TEST(CustomOp, RegistrationFromThreadsBesideLookups) {
  std::vector<std::thread> threads;
  std::atomic<int> registered{0}, found{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        OpDefinition def = gated_tanh_def("test_threaded_" + std::to_string(t) + "_" + std::to_string(i));
        register_op(def);
        ++registered;
        found += is_registered_op("test_threaded_" + std::to_string((t + 1) % 4) + "_" + std::to_string(i)) ? 1 : 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(registered.load(), 100);
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 25; ++i) {
      EXPECT_EQ(find_op("test_threaded_" + std::to_string(t) + "_" + std::to_string(i)).name(),
                "test_threaded_" + std::to_string(t) + "_" + std::to_string(i));
    }
  }
  Tensor a = testing::random_tensor({2}), b = testing::random_tensor({2});
  EXPECT_TRUE(same_bits(call_op("test_threaded_3_24", {a, b})[0], reference(a, b)));
}

TEST(CustomOp, RegistrationErrors) {
  gated_tanh();
  expect_error([] { register_op(gated_tanh_def("test_gated_tanh")); }, {"'test_gated_tanh' already exists"});
  expect_error([] { register_op(gated_tanh_def("matmul")); }, {"'matmul' already exists", "built-in"});
  expect_error([] { register_op(gated_tanh_def("my op")); }, {"'my op' is not an identifier"});
  expect_error([] { register_op(gated_tanh_def("2x")); }, {"not an identifier"});
  expect_error([] { register_op(gated_tanh_def("constant")); }, {"not an identifier"});
  OpDefinition no_kernel;
  no_kernel.name = "test_no_kernel";
  expect_error([&] { register_op(no_kernel); }, {"test_no_kernel", "forward kernel, an expression"});
  OpDefinition two_outputs = gated_tanh_def("test_two_outputs");
  two_outputs.num_outputs = 2;
  two_outputs.shape = nullptr;
  expect_error([&] { register_op(two_outputs); }, {"test_two_outputs", "needs a shape rule"});
  OpDefinition bad_arity = gated_tanh_def("test_bad_arity");
  bad_arity.num_inputs = 40;
  expect_error([&] { register_op(bad_arity); }, {"num_inputs must be in"});
  expect_error([] { find_op("test_missing"); }, {"no op named 'test_missing'"});
}

TEST(CustomOp, ErrorsOfTheUsersRules) {
  Tensor a = testing::random_leaf({2, 3}), b = testing::random_leaf({2, 3});
  // Wrong arity and a shape rule that refuses (its message kept, the op named).
  expect_error([&] { gated_tanh()({a}); }, {"test_gated_tanh", "expected 2 inputs, got 1"});
  expect_error([&] { gated_tanh()({a, zeros({3})}); }, {"custom op 'test_gated_tanh': shape rule", "a and b differ"});

  auto make = [](const std::string& name, auto tweak) {
    OpDefinition def = gated_tanh_def(name);
    tweak(def);
    return register_op(def);
  };
  // A shape rule that throws something else than smelt::Error, or returns the wrong count.
  static const CustomOp throwing = make("test_shape_throws", [](OpDefinition& d) {
    d.shape = [](const std::vector<TensorMeta>&, const Attrs&) -> std::vector<TensorMeta> {
      throw std::out_of_range("index 7");
    };
  });
  expect_error([&] { throwing({a, b}); }, {"custom op 'test_shape_throws': shape rule threw", "index 7"});
  static const CustomOp counted = make("test_shape_count", [](OpDefinition& d) {
    d.shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0], in[0]}; };
  });
  expect_error([&] { counted({a, b}); }, {"test_shape_count", "returned 2 outputs", "has 1"});

  // Backward returning too few gradients, or a gradient of a shape that does not fit.
  static const CustomOp few = make("test_backward_few", [](OpDefinition& d) {
    d.backward = [](const GradContext& c) { return std::vector<Tensor>{c.grads[0]}; };
  });
  expect_error([&] { few({a, b})[0].sum().backward(); }, {"test_backward_few", "returned 1 gradients for 2 inputs"});
  static const CustomOp shaped = make("test_backward_shape", [](OpDefinition& d) {
    d.backward = [](const GradContext& c) { return std::vector<Tensor>{c.grads[0], c.grads[0].sum({1})}; };
  });
  expect_error([&] { shaped({a, b})[0].sum().backward(); },
               {"test_backward_shape", "gradient of shape (2,)", "input 1 of shape (2, 3)"});
  // A gradient that broadcasts to the input is summed down, as for built-ins.
  static const CustomOp broadcast = make("test_backward_broadcast", [](OpDefinition& d) {
    d.backward = [](const GradContext& c) {
      return std::vector<Tensor>{c.grads[0].expand({4, 2, 3}), Tensor()};
    };
  });
  Tensor a2 = testing::random_leaf({2, 3});
  broadcast({a2, b})[0].sum().backward();
  EXPECT_TRUE(all_close(a2.grad(), full({2, 3}, 4.0, DType::Float64)));

  // A forward that writes its input, and one that throws.
  static const CustomOp writer = make("test_writes_input", [](OpDefinition& d) {
    d.forward = [](const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
      gated_tanh_kernel(in, attrs, out);
      in[1].data<double>()[0] = 42;
    };
  });
  Tensor x = testing::random_tensor({2, 3}), y = testing::random_tensor({2, 3});
  expect_error([&] { writer({x, y}); }, {"test_writes_input", "forward changed its input 1"});
  static const CustomOp thrower = make("test_forward_throws", [](OpDefinition& d) {
    d.forward = [](const std::vector<Tensor>&, const Attrs&, const std::vector<Tensor>&) {
      throw std::runtime_error("device lost");
    };
  });
  expect_error([&] { thrower({x, y}); }, {"custom op 'test_forward_throws': forward threw", "device lost"});
  // ... also inside a compiled plan, and from threads at once.
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return thrower({in[0] * 2.0, in[1]}); });
  expect_error([&] { f({x, y}); }, {"test_forward_throws", "device lost"});
  std::vector<std::thread> threads;
  std::vector<int> caught(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        thrower({x, y});
      } catch (const Error&) {
        caught[size_t(t)] = 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(caught, (std::vector<int>{1, 1, 1, 1}));
}

// A counter: adds 1 to its int64 input in place and returns the new value (OpDefinition::writes).
const CustomOp& increment() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "test_increment";
    def.writes = {0};
    def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
      int64_t* p = in[0].data<int64_t>();
      for (int64_t i = 0; i < in[0].numel(); ++i) out[0].data<int64_t>()[i] = ++p[i];
    };
    return register_op(def);
  }();
  return op;
}

TEST(CustomOp, AnOpThatWritesItsInputRunsEagerlyOnly) {
  Tensor counter = zeros({2}, DType::Int64);
  std::vector<double> seen;
  for (int call = 0; call < 5; ++call) seen.push_back(increment()({counter})[0].to_vector()[0]);
  EXPECT_EQ(seen, (std::vector<double>{1, 2, 3, 4, 5}));  // once per call
  EXPECT_EQ(counter.to_vector(), (std::vector<double>{5, 5}));
  // The write is a version bump: a tensor autograd saved from that memory is refused at backward.
  Tensor w = testing::random_leaf({2});
  Tensor state = zeros({2}, DType::Float64);
  OpDefinition scale_def;  // y = x * 2, and x := 0 (writes input 0)
  scale_def.name = "test_scale_and_clear";
  scale_def.writes = {0};
  scale_def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
    for (int64_t i = 0; i < in[0].numel(); ++i) {
      out[0].data<double>()[i] = in[0].data<double>()[i] * 2;
      in[0].data<double>()[i] = 0;
    }
  };
  static const CustomOp clear = register_op(scale_def);
  Tensor y = w * state;  // saves state for w's gradient
  {
    NoGradGuard no_grad;
    clear({state});
  }
  expect_error([&] { y.sum().backward(); }, {"modified in place"});
  // Not differentiable, not traceable, and the usual in-place checks on the target.
  expect_error([&] { clear({testing::random_leaf({2})}); }, {"test_scale_and_clear", "requires grad"});
  CompiledFunction f = compile([](const std::vector<Tensor>& in) { return increment()({in[0]}); });
  expect_error([&] { f({zeros({2}, DType::Int64)}); }, {"test_increment", "cannot be traced"});
  expect_error([] { increment()({zeros({1}, DType::Int64).expand({3})}); }, {"test_increment", "several elements"});
  OpDefinition bad = scale_def;
  bad.name = "test_writes_out_of_range";
  bad.writes = {1};
  expect_error([&] { register_op(bad); }, {"writes names input 1", "1 inputs"});
}

TEST(CustomOp, ExpressionThatDisagreesWithTheShapeRuleIsAnError) {
  static const CustomOp op = [] {
    OpDefinition def = gated_tanh_def("test_expression_shape");
    def.expression = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<Tensor> {
      return {in[0].sum({0})};
    };
    return register_op(def);
  }();
  Tensor a = testing::random_tensor({2, 3}), b = testing::random_tensor({2, 3});
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return op({in[0], in[1]}); });
  expect_error([&] { f({a, b}); }, {"test_expression_shape", "expression's output 0", "(3,)", "(2, 3)"});
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// A straight-through estimator: round forward, identity backward (a gradient the forward's own
// ops would not give: round's is zero).
std::vector<Tensor> straight_through(const Tensor& x) {
  return apply_function("straight_through", {x}, [&] { return std::vector<Tensor>{round(x) * 1.0}; },
                        [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
}

TEST(CustomFunction, HandWrittenBackwardReplacesTheForwardsGradient) {
  Tensor x = testing::random_leaf({6}, -3, 3, 71);
  Tensor y = straight_through(x)[0];
  EXPECT_TRUE(same_bits(y.detach(), round(x.detach())));
  (y * y).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), 2.0 * round(x.detach()), 0, 0));
  // Without grad mode, or inputs that need none, no node is recorded.
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(straight_through(x)[0].requires_grad());
  }
  EXPECT_FALSE(straight_through(x.detach())[0].requires_grad());
}

TEST(CustomFunction, ABackwardReadingTheSavedOutputDifferentiatesAgain) {
  // exp with the output saved by the closure: d/dx of the backward (g * y) reaches x through y.
  auto exp_fn = [](const Tensor& x) {
    std::vector<Tensor> out;
    auto saved = std::make_shared<Tensor>();
    out = apply_function("exp_saving_output", {x}, [&] { *saved = exp(x); return std::vector<Tensor>{*saved}; },
                         [saved](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0] * *saved}; });
    return out[0];
  };
  Tensor x = testing::random_leaf({4}, -1, 1, 91);
  Tensor g = autograd::grad({exp_fn(x).sum()}, {x}, {}, false, true)[0];
  EXPECT_TRUE(all_close(g, exp(x.detach()), 1e-12, 1e-12));
  Tensor gg = autograd::grad({g.sum()}, {x})[0];
  EXPECT_TRUE(all_close(gg, exp(x.detach()), 1e-12, 1e-12));
}

TEST(CustomFunction, CompiledInferenceInlinesItAndCompiledDifferentiationRefuses) {
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {straight_through(in[0] * 3.0)[0] + 1.0};
  };
  CompiledFunction f = compile(fn);
  Tensor x = testing::random_tensor({10}, -2, 2, 81);
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
  EXPECT_EQ(f.report().op_steps, 0);  // the marker is inlined away
  Tensor leaf = x.clone().set_requires_grad();
  expect_error([&] { f({leaf})[0].sum().backward(); },
               {"function 'straight_through'", "compile_step"});
}

TEST(CustomFunction, TheMarkerIsRegisteredAtLoadAndItsTextParses) {
  EXPECT_TRUE(is_registered_op("autograd_function"));
  Graph g = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return straight_through(in[0]);
  }, {testing::random_tensor({3})});
  const std::string text = g.print();
  EXPECT_NE(text.find("autograd_function("), std::string::npos) << text;
  EXPECT_EQ(Graph::parse(text).print(), text);
}

TEST(CustomFunction, ErrorsOfTheBackward) {
  Tensor x = testing::random_leaf({3}), w = testing::random_leaf({3});
  auto bad_count = [&] {
    return apply_function("two_in", {x, w}, [&] { return std::vector<Tensor>{x * w}; },
                          [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  };
  expect_error([&] { bad_count()[0].sum().backward(); }, {"function 'two_in'", "returned 1 gradients for 2"});
  auto bad_shape = [&] {
    return apply_function("shape_out", {x}, [&] { return std::vector<Tensor>{x * 2.0}; },
                          [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].sum()}; });
  };
  expect_error([&] { bad_shape()[0].sum().backward(); }, {"function 'shape_out'", "gradient of shape ()", "(3,)"});
  auto throwing = [&] {
    return apply_function("throws", {x}, [&]() -> std::vector<Tensor> { throw std::runtime_error("nope"); },
                          [](const std::vector<Tensor>& g) { return g; });
  };
  expect_error(throwing, {"function 'throws': forward threw", "nope"});
}

}  // namespace
}  // namespace smelt
