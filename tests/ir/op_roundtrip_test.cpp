// Every op of the op table, one node at a time: the printed IR parses back to the same text, the
// verifier accepts it, and the interpreter computes exactly what eager execution through the
// dispatcher computes. The examples are a table below; an op without an example fails the test,
// so a new row in ops.def cannot be forgotten here.
#include <cmath>
#include <map>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/dispatch.h"
#include "support/check.h"
#include "support/helpers.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

using testing::identical;

using ops::Attrs;
using ops::OpId;
using Ints = std::vector<int64_t>;

// One input of an example: its meta and the range its random values come from (floats uniform
// in [lo, hi); Int64 integers in [lo, hi), e.g. valid indices; Bool from integers in [0, 2)).
struct InputSpec {
  ops::TensorMeta meta;
  double lo = -2, hi = 2;
};

InputSpec f32(Shape s, double lo = -2, double hi = 2) { return {{std::move(s), DType::Float32}, lo, hi}; }
InputSpec f64(Shape s, double lo = -2, double hi = 2) { return {{std::move(s), DType::Float64}, lo, hi}; }
InputSpec i64(Shape s, int64_t hi, int64_t lo = 0) { return {{std::move(s), DType::Int64}, double(lo), double(hi)}; }
InputSpec boolean(Shape s) { return {{std::move(s), DType::Bool}, 0, 2}; }
InputSpec u8(Shape s) { return {{std::move(s), DType::UInt8}, 0, 256}; }
InputSpec i8(Shape s) { return {{std::move(s), DType::Int8}, -128, 128}; }
InputSpec i32(Shape s) { return {{std::move(s), DType::Int32}, -1000, 1000}; }
InputSpec scale(Shape s) { return f32(std::move(s), 0.01, 0.2); }

struct OpExample {
  OpId op;
  std::vector<InputSpec> inputs;
  Attrs attrs;
};

Attrs conv_attrs() {
  return {{"stride", Ints{2, 1}}, {"padding", Ints{1, 1}}, {"dilation", Ints{1, 1}}, {"groups", int64_t(2)}};
}
Attrs with(Attrs attrs, const std::string& name, ops::AttrValue value) {
  attrs.set(name, std::move(value));
  return attrs;
}
Attrs avg_pool_attrs() {
  return {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"count_include_pad", int64_t(0)}};
}

// At least one example per op; several where an op has distinct modes (broadcasting, batched
// matmul, training vs eval, ...). Ranges keep log/sqrt/div/pow away from NaN and Inf.
std::vector<OpExample> examples() {
  const Shape image{1, 2, 5, 5};  // (N, C, H, W)
  return {
      // elementwise, unary
      {OpId::neg, {f32({2, 3})}, {}},
      {OpId::exp, {f64({2, 3})}, {}},
      {OpId::log, {f32({2, 3}, 0.1, 3)}, {}},
      {OpId::sqrt, {f32({2, 3}, 0, 3)}, {}},
      {OpId::rsqrt, {f64({4}, 0.1, 3)}, {}},
      {OpId::abs, {f32({2, 3})}, {}},
      {OpId::sign, {f32({2, 3})}, {}},
      {OpId::erf, {f32({5})}, {}},
      {OpId::relu, {f32({2, 3})}, {}},
      {OpId::leaky_relu, {f32({2, 3})}, {{"negative_slope", 0.1}}},
      {OpId::sigmoid, {f32({2, 3})}, {}},
      {OpId::tanh, {f64({2, 3})}, {}},
      {OpId::gelu, {f32({2, 3})}, {{"approximate", int64_t(0)}}},
      {OpId::gelu, {f32({2, 3})}, {{"approximate", int64_t(1)}}},
      {OpId::silu, {f32({2, 3})}, {}},
      {OpId::softplus, {f32({2, 3}, -30, 30)}, {{"beta", 1.5}, {"threshold", 20.0}}},
      {OpId::clamp, {f32({2, 3})}, {{"min", -0.5}, {"max", 1.5}}},
      {OpId::clamp, {f64({2, 3})}, {{"min", 0.25}}},
      {OpId::cast, {f32({2, 3})}, {{"dtype", DType::Float64}}},
      {OpId::floor, {f32({2, 3})}, {}},
      {OpId::ceil, {f64({2, 3})}, {}},
      {OpId::round, {f32({2, 3})}, {}},
      {OpId::sin, {f32({2, 3})}, {}},
      {OpId::cos, {f32({2, 3})}, {}},
      {OpId::tan, {f32({2, 3}, -1, 1)}, {}},
      {OpId::asin, {f32({2, 3}, -0.9, 0.9)}, {}},
      {OpId::acos, {f64({2, 3}, -0.9, 0.9)}, {}},
      {OpId::atan, {f32({2, 3})}, {}},
      {OpId::sinh, {f32({2, 3})}, {}},
      {OpId::cosh, {f32({2, 3})}, {}},
      {OpId::asinh, {f32({2, 3})}, {}},
      {OpId::acosh, {f32({2, 3}, 1.1, 3)}, {}},
      {OpId::atanh, {f32({2, 3}, -0.9, 0.9)}, {}},
      {OpId::cast, {i64({2, 3}, 5, -5)}, {{"dtype", DType::Float32}}},
      {OpId::cast, {f64({2, 3})}, {{"dtype", DType::Bool}}},
      // elementwise, binary and ternary (with broadcasting)
      {OpId::add, {f32({2, 3}), f32({3})}, {}},
      {OpId::add, {i64({2, 1}, 9), i64({4}, 9)}, {}},
      {OpId::sub, {f32({2, 1, 3}), f32({4, 1})}, {}},
      {OpId::mul, {f64({2, 3}), f64({})}, {}},
      {OpId::div, {f32({2, 3}), f32({2, 1}, 0.5, 2)}, {}},
      {OpId::pow, {f32({2, 3}, 0.5, 2), f32({3}, -2, 2)}, {}},
      {OpId::maximum, {f32({2, 3}), f32({3})}, {}},
      {OpId::minimum, {f64({3, 1}), f64({1, 4})}, {}},
      {OpId::eq, {i64({2, 3}, 3), i64({3}, 3)}, {}},
      {OpId::ne, {i64({2, 3}, 3), i64({2, 1}, 3)}, {}},
      {OpId::lt, {f32({2, 3}), f32({3})}, {}},
      {OpId::le, {f32({2, 3}), f32({})}, {}},
      {OpId::gt, {f64({2, 3}), f64({2, 3})}, {}},
      {OpId::ge, {f32({2, 3}), f32({2, 1})}, {}},
      {OpId::where, {boolean({2, 3}), f32({2, 3}), f32({3})}, {}},
      // reductions
      {OpId::sum, {f32({2, 3, 4})}, {{"dims", Ints{1}}, {"keepdim", int64_t(0)}}},
      {OpId::sum, {f64({2, 3})}, {{"dims", Ints{}}, {"keepdim", int64_t(0)}}},
      {OpId::mean, {f32({2, 3, 4})}, {{"dims", Ints{0, 2}}, {"keepdim", int64_t(1)}}},
      {OpId::amax, {f32({2, 3, 4})}, {{"dims", Ints{2}}, {"keepdim", int64_t(0)}}},
      {OpId::amin, {f64({3, 4})}, {{"dims", Ints{0}}, {"keepdim", int64_t(1)}}},
      {OpId::prod, {f64({2, 3, 4})}, {{"dims", Ints{0, 2}}, {"keepdim", int64_t(1)}}},
      {OpId::prod, {i64({3, 4}, 3)}, {{"dims", Ints{}}, {"keepdim", int64_t(0)}}},
      {OpId::var, {f32({3, 4})}, {{"dims", Ints{1}}, {"keepdim", int64_t(0)}, {"correction", int64_t(1)}}},
      {OpId::argmax, {f32({3, 4})}, {{"dim", int64_t(1)}, {"keepdim", int64_t(0)}}},
      {OpId::softmax, {f32({2, 3, 4})}, {{"dim", int64_t(1)}}},
      {OpId::log_softmax, {f64({3, 4})}, {{"dim", int64_t(-1)}}},
      {OpId::nll_loss, {f32({4, 3}, -3, 0), i64({4}, 3)}, {{"ignore_index", int64_t(-100)}, {"reduction", int64_t(1)}}},
      {OpId::nll_loss, {f64({2, 3, 2}, -3, 0), i64({2, 2}, 3)}, {{"ignore_index", int64_t(1)}, {"reduction", int64_t(0)}}},
      // contractions
      {OpId::matmul, {f32({2, 3}), f32({3, 4})}, {}},
      {OpId::matmul, {f64({2, 1, 3, 4}), f64({5, 4, 2})}, {}},  // batched, broadcast batch dims
      {OpId::matmul, {f32({3}), f32({2, 3, 4})}, {}},           // vector @ batch of matrices
      {OpId::conv2d, {f32(image), f32({4, 1, 3, 3})}, conv_attrs()},
      {OpId::conv2d_grad_input, {f32({1, 4, 3, 5}), f32({4, 1, 3, 3})}, with(conv_attrs(), "input_shape", Ints{1, 2, 5, 5})},
      {OpId::conv2d_grad_weight, {f64(image), f64({1, 4, 3, 5})}, with(conv_attrs(), "weight_shape", Ints{4, 1, 3, 3})},
      // the blocked channel layout (internal rows of compiled plans): 2 channels in blocks of 4
      {OpId::to_blocked, {f32(image)}, {{"block", int64_t(4)}}},
      {OpId::from_blocked, {f32({1, 1, 5, 5, 4})}, {{"channels", int64_t(2)}}},
      {OpId::conv2d_blocked, {f32({1, 1, 5, 5, 4}), f32({4, 1, 3, 3})}, with(conv_attrs(), "channels", int64_t(2))},
      {OpId::conv2d_blocked, {f32(image), f32({4, 1, 3, 3})}, with(conv_attrs(), "block", int64_t(4))},
      {OpId::max_pool2d_blocked, {f32({1, 1, 5, 5, 4})},
       {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{0, 0}}, {"dilation", Ints{1, 1}}}},
      // pooling
      {OpId::max_pool2d, {f32(image)}, {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{0, 0}}, {"dilation", Ints{1, 1}}}},
      {OpId::max_pool2d_grad, {f32({1, 2, 2, 2}), i64({1, 2, 2, 2}, 25)}, {{"input_shape", Ints{1, 2, 5, 5}}}},
      {OpId::avg_pool2d, {f32(image)}, avg_pool_attrs()},
      {OpId::avg_pool2d_grad, {f32({1, 2, 3, 3})}, with(avg_pool_attrs(), "input_shape", Ints{1, 2, 5, 5})},
      {OpId::adaptive_avg_pool2d, {f32(image)}, {{"output_size", Ints{2, 3}}}},
      {OpId::adaptive_avg_pool2d_grad, {f32({1, 2, 2, 3})}, {{"input_shape", Ints{1, 2, 5, 5}}}},
      // normalization
      {OpId::layer_norm, {f32({2, 3, 4}), f32({4}), f32({4})}, {{"ndim", int64_t(1)}, {"eps", 1e-5}}},
      {OpId::batch_norm, {f32({3, 2, 4}), f32({2}), f32({2}), f32({2}), f32({2}, 0.5, 2)},
       {{"training", int64_t(0)}, {"momentum", 0.1}, {"eps", 1e-5}}},
      {OpId::batch_norm, {f64({3, 2, 2, 2}), f64({2}), f64({2}), f64({2}), f64({2}, 0.5, 2)},
       {{"training", int64_t(1)}, {"momentum", 0.1}, {"eps", 1e-5}}},
      // random: compared under the same seed (p = 0 is the identity)
      {OpId::dropout, {f32({4, 5}), i64({2}, 1000)}, {{"p", 0.0}, {"training", int64_t(1)}}},
      {OpId::dropout, {f32({4, 5}), i64({2}, 1000)}, {{"p", 0.5}, {"training", int64_t(1)}}},
      {OpId::dropout, {f64({4, 5}), i64({2}, 1000)}, {{"p", 0.5}, {"training", int64_t(0)}}},
      // indexing and joining (indices in range; repeated indices accumulate)
      {OpId::embedding, {f32({5, 3}), i64({2, 4}, 5)}, {}},
      {OpId::index_select, {f32({4, 3}), i64({5}, 4)}, {{"dim", int64_t(0)}}},
      {OpId::index_add, {f32({4, 3}), i64({5}, 4), f32({5, 3})}, {{"dim", int64_t(0)}}},
      {OpId::gather, {f32({3, 4}), i64({3, 2}, 4)}, {{"dim", int64_t(1)}}},
      {OpId::scatter_add, {f64({3, 4}), i64({3, 2}, 4), f64({3, 2})}, {{"dim", int64_t(1)}}},
      {OpId::one_hot, {i64({4}, 3)}, {{"num_classes", int64_t(3)}}},
      {OpId::cumsum, {f32({2, 3})}, {{"dim", int64_t(1)}, {"exclusive", int64_t(0)}, {"reverse", int64_t(1)}}},
      {OpId::cumsum, {i64({4}, 5)}, {{"dim", int64_t(0)}, {"exclusive", int64_t(1)}, {"reverse", int64_t(0)}}},
      {OpId::topk, {f64({3, 5})}, {{"k", int64_t(2)}, {"dim", int64_t(1)}, {"largest", int64_t(0)}}},
      {OpId::cat, {f32({2, 3}), f32({2, 1}), f32({2, 2})}, {{"dim", int64_t(1)}}},
      {OpId::cat, {i64({1, 2}, 9)}, {{"dim", int64_t(0)}}},
      // views and movement
      {OpId::reshape, {f32({2, 3, 4})}, {{"shape", Ints{6, 4}}}},
      {OpId::permute, {f32({2, 3, 4})}, {{"dims", Ints{2, 0, 1}}}},
      {OpId::slice, {f32({5, 4})}, {{"dim", int64_t(0)}, {"start", int64_t(1)}, {"end", int64_t(5)}, {"step", int64_t(2)}}},
      {OpId::slice_grad, {f32({2, 4})},
       {{"input_shape", Ints{5, 4}}, {"dim", int64_t(0)}, {"start", int64_t(1)}, {"end", int64_t(5)}, {"step", int64_t(2)}}},
      {OpId::expand, {f32({3, 1})}, {{"shape", Ints{2, 3, 4}}}},
      {OpId::contiguous, {f64({3, 4})}, {}},
      // quantized inference
      {OpId::quantize_linear, {f32({2, 3, 4}), scale({3}), u8({3})}, {{"axis", int64_t(1)}}},
      {OpId::quantize_linear, {f64({5}), scale({}), i8({})}, {{"axis", int64_t(1)}}},
      {OpId::dequantize_linear, {i8({4, 3}), scale({3}), i8({3})}, {{"axis", int64_t(-1)}}},
      {OpId::dequantize_linear, {u8({2, 2}), scale({}), u8({})}, {{"axis", int64_t(1)}}},
      {OpId::qlinear_matmul, {u8({2, 3, 4}), scale({}), u8({}), i8({4, 5}), scale({5}), i8({5}), f32({}, 0.5, 1),
                              u8({}), i32({5})}, {}},
      {OpId::matmul_integer, {i8({3, 4}), u8({4, 2}), i8({3}), u8({2})}, {}},
      {OpId::qlinear_conv2d, {u8({1, 2, 5, 5}), scale({}), u8({}), i8({3, 2, 3, 3}), scale({3}), i8({3}),
                              f32({}, 0.5, 1), i8({}), i32({3})},
       {{"stride", Ints{1, 2}}, {"padding", Ints{1, 0, 0, 1}}, {"dilation", Ints{1, 1}}, {"groups", int64_t(1)}}},
      {OpId::conv2d_integer, {u8({1, 4, 4, 4}), i8({2, 2, 2, 2}), u8({}), i8({})},
       {{"stride", Ints{1, 1}}, {"padding", Ints{0, 0, 1, 1}}, {"dilation", Ints{2, 1}}, {"groups", int64_t(2)}}},
  };
}

Tensor random_input(const InputSpec& spec, Generator* gen) {
  const ops::TensorMeta& m = spec.meta;
  if (dtype_is_floating(m.dtype)) return uniform(m.shape, spec.lo, spec.hi, m.dtype, gen);
  Tensor ints = randint(int64_t(spec.lo), int64_t(spec.hi), m.shape, gen);
  return m.dtype == DType::Int64 ? ints : cast(ints, m.dtype);
}

// Element-for-element equality (NaN equals NaN): the interpreter runs the same kernels.
std::string describe(const OpExample& e) {
  std::string s = ops::op_name(e.op);
  s += "(";
  for (size_t i = 0; i < e.inputs.size(); ++i) s += (i ? ", " : "") + ir::meta_str(e.inputs[i].meta);
  s += ")";
  for (const auto& [name, value] : e.attrs.items()) s += " " + name + "=" + ops::attr_value_str(value);
  return s;
}

// A graph with one node: graph inputs (or, with `as_constants`, constants holding `values`)
// feeding `e.op`, and every output of the node returned.
std::unique_ptr<ir::Graph> single_node_graph(const OpExample& e, const std::vector<Tensor>& values,
                                             bool as_constants) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> args;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    args.push_back(as_constants ? g->add_constant(values[i]) : g->add_input(e.inputs[i].meta));
  }
  ir::Node* node = g->add_node(e.op, args, e.attrs);
  for (ir::Value* out : node->outputs) g->add_output(out);
  return g;
}

// Each input cloned: batch_norm in training updates its running statistics in place, and both
// runs must see the same values.
std::vector<Tensor> fresh(const std::vector<Tensor>& values) {
  std::vector<Tensor> out;
  for (const Tensor& v : values) out.push_back(v.clone());
  return out;
}

TEST(OpRoundTrip, EveryOpHasAnExample) {
  std::map<OpId, int> count;
  for (const OpExample& e : examples()) ++count[e.op];
  for (int i = 0; i < ops::kOpCount; ++i) {
    OpId op = static_cast<OpId>(i);
    if (op == OpId::group) continue;  // holds a subgraph, not an op example: tests/ir/group_test.cpp
    EXPECT_GT(count[op], 0) << "op '" << ops::op_name(op)
                            << "' has no example in tests/ir/op_roundtrip_test.cpp: add one";
  }
}

TEST(OpRoundTrip, PrintParsePrintIsStableAndVerifies) {
  for (const OpExample& e : examples()) {
    SCOPED_TRACE(describe(e));
    Generator gen(uint64_t(e.op) + 1);
    std::vector<Tensor> values;
    for (const InputSpec& s : e.inputs) values.push_back(random_input(s, &gen));
    for (bool as_constants : {false, true}) {
      auto g = single_node_graph(e, values, as_constants);
      ASSERT_NO_THROW(ir::verify(*g));
      const std::string text = ir::print(*g);
      auto parsed = ir::parse(text);
      ASSERT_NO_THROW(ir::verify(*parsed)) << text;
      EXPECT_EQ(ir::print(*parsed), text);
      EXPECT_EQ(ir::print(*parsed->clone()), text);
      if (as_constants) {  // constants print with enough digits to come back bit for bit
        for (size_t i = 0; i < values.size(); ++i) {
          EXPECT_TRUE(identical(parsed->constants()[i]->constant, values[i])) << "constant " << i << "\n" << text;
        }
      }
    }
  }
}

TEST(OpRoundTrip, InterpreterEqualsEagerDispatch) {
  for (const OpExample& e : examples()) {
    SCOPED_TRACE(describe(e));
    Generator gen(uint64_t(e.op) + 100);
    std::vector<Tensor> values;
    for (const InputSpec& s : e.inputs) values.push_back(random_input(s, &gen));
    auto g = ir::parse(ir::print(*single_node_graph(e, values, false)));

    manual_seed(1234);  // random ops draw the same numbers in both runs
    std::vector<Tensor> interpreted = trace::interpret(*g, fresh(values));
    manual_seed(1234);
    std::vector<Tensor> eager;
    {
      NoGradGuard no_grad;
      eager = ops::call(e.op, fresh(values), e.attrs);
    }
    ASSERT_EQ(interpreted.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      EXPECT_TRUE(identical(interpreted[k], eager[k]))
          << "output " << k << "\ninterpreter:\n" << interpreted[k] << "\neager:\n" << eager[k];
    }
  }
}

}  // namespace
}  // namespace smelt
