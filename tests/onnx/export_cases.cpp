// The export cases (export_cases.h). Inputs stay inside each op's domain (log of positives, acosh
// above 1); index inputs are in range.
#include "export_cases.h"

#include <cmath>
#include <tuple>

#include "ops/dispatch.h"
#include "ops/op_table.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"

namespace smelt::export_cases {
namespace {

using Ts = std::vector<Tensor>;
using ops::OpId;

Generator& gen() {
  static Generator g(2024);
  return g;
}
Tensor rn(const Shape& s, DType t = DType::Float32) { return randn(s, t, &gen()); }
Tensor un(const Shape& s, double lo, double hi) { return uniform(s, lo, hi, DType::Float32, &gen()); }
Tensor ri(int64_t lo, int64_t hi, const Shape& s) { return randint(lo, hi, s, &gen()); }

Case unary(const std::string& name, Tensor (*f)(const Tensor&), Tensor x, bool exact = true) {
  return {name, [f](const Ts& in, const Ts&) { return Ts{f(in[0])}; }, {x}, {}, exact};
}
Case binary(const std::string& name, Tensor (*f)(const Tensor&, const Tensor&), Tensor a, Tensor b) {
  return {name, [f](const Ts& in, const Ts&) { return Ts{f(in[0], in[1])}; }, {a, b}};
}
Case one(const std::string& name, std::function<Tensor(const Tensor&)> f, Tensor x, bool exact = true) {
  return {name, [f](const Ts& in, const Ts&) { return Ts{f(in[0])}; }, {x}, {}, exact};
}

Ts conv_grads_in_groups(const Ts& in, int64_t groups) {
  const ops::Attrs a{{"stride", std::vector<int64_t>{2, 1}}, {"padding", std::vector<int64_t>{1, 0}},
                     {"dilation", std::vector<int64_t>{1, 2}}, {"groups", groups}};
  ops::Attrs gi = a, gw = a;
  gi.set("input_shape", in[0].shape());
  gw.set("weight_shape", in[1].shape());
  const Tensor dy = in[2];
  return {ops::call1(OpId::conv2d_grad_input, {dy, in[1]}, gi), ops::call1(OpId::conv2d_grad_weight, {in[0], dy}, gw)};
}
Ts conv_grads(const Ts& in, const Ts&) { return conv_grads_in_groups(in, 1); }
Ts conv_grads_groups3(const Ts& in, const Ts&) { return conv_grads_in_groups(in, 3); }

// Forward pieces of models.
Ts mlp(const Ts& in, const Ts& p) {
  Tensor h = relu(linear(in[0], p[0], p[1]));
  h = gelu(linear(h, p[2], p[3]));
  return {log_softmax(linear(h, p[4], p[5]), -1)};
}

Ts cnn(const Ts& in, const Ts& p) {
  Tensor h = relu(batch_norm(conv2d(in[0], p[0], p[1], 1, 1), p[2], p[3], p[4], p[5], false));
  h = max_pool2d(h, 2);
  h = silu(conv2d(h, p[6], p[7], 2, 1, 1, 2));
  h = adaptive_avg_pool2d(h, 1).reshape({h.size(0), -1});
  return {softmax(linear(h, p[8], p[9]), 1)};
}

// Pre-norm self-attention block with a GELU MLP: x (B, T, D), 2 heads.
Ts transformer(const Ts& in, const Ts& p) {
  const Tensor& x = in[0];
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = 2, hd = D / H;
  Tensor h = layer_norm(x, {D}, p[0], p[1]);
  Tensor qkv = linear(h, p[2], p[3]);  // (B, T, 3D)
  auto head = [&](int64_t k) { return slice(qkv, 2, k * D, (k + 1) * D).reshape({B, T, H, hd}).permute({0, 2, 1, 3}); };
  Tensor q = head(0), k = head(1), v = head(2);
  Tensor scores = matmul(q, k.permute({0, 1, 3, 2})) * (1.0 / std::sqrt(double(hd)));
  Tensor mask = full({T, T}, -1e9) * cast(gt(arange(T).reshape({1, T}), arange(T).reshape({T, 1})), DType::Float32);
  Tensor att = matmul(softmax(scores + mask, -1), v).permute({0, 2, 1, 3}).contiguous().reshape({B, T, D});
  Tensor y = x + linear(att, p[4], p[5]);
  Tensor m = linear(gelu(linear(layer_norm(y, {D}, p[6], p[7]), p[8], p[9]), GeluApprox::Tanh), p[10], p[11]);
  return {y + m};
}

}  // namespace

std::vector<Tensor> max_pool_grad(const Ts& in, const Ts&) {
  const ops::Attrs a{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                     {"padding", std::vector<int64_t>{0, 0}}};
  Ts r = ops::call(OpId::max_pool2d, {in[0]}, a);
  ops::Attrs g = a;
  g.set("input_shape", in[0].shape());
  return {ops::call1(OpId::max_pool2d_grad, {r[0], r[1]}, g)};
}

std::vector<Tensor> index_add_fn(const Ts& in, const Ts&) {
  return {index_add(in[0], 0, tensor({2, 0, 2}), ones({3, 3}))};
}

std::vector<std::string> exportable_ops() {
  std::vector<std::string> names;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const OpId op = OpId(i);
    if (op == OpId::group || op == OpId::max_pool2d_grad || op == OpId::avg_pool2d_grad ||
        op == OpId::adaptive_avg_pool2d_grad || op == OpId::conv2d_blocked || op == OpId::to_blocked ||
        op == OpId::from_blocked || op == OpId::max_pool2d_blocked) {
      continue;
    }
    names.push_back(ops::op_name(op));
  }
  return names;
}

std::vector<Case> all() {
  std::vector<Case> c;
  const Tensor x = rn({3, 4}), pos = un({3, 4}, 0.1, 4), unit = un({3, 4}, -0.9, 0.9), big = un({3, 4}, 1.1, 4);
  // ---- elementwise, unary
  for (auto [name, f] : std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>>{
           {"neg", neg}, {"exp", exp}, {"abs", abs}, {"sign", sign}, {"erf", erf}, {"relu", relu},
           {"sigmoid", sigmoid}, {"tanh", tanh}, {"floor", floor}, {"ceil", ceil}, {"sin", sin},
           {"cos", cos}, {"tan", tan}, {"atan", atan}, {"sinh", sinh}, {"cosh", cosh}, {"asinh", asinh}}) {
    c.push_back(unary(name, f, x * 2.0));
  }
  c.push_back(unary("round", round, tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.7, -3.2}, DType::Float32)));
  c.push_back(unary("log", log, pos));
  c.push_back(unary("sqrt", sqrt, pos));
  c.push_back(unary("rsqrt", rsqrt, pos));
  c.push_back(unary("asin", asin, unit));
  c.push_back(unary("acos", acos, unit));
  c.push_back(unary("atanh", atanh, unit));
  c.push_back(unary("acosh", acosh, big));
  c.push_back(unary("neg_int64", neg, ri(-50, 50, {5})));
  c.push_back(unary("exp_float64", exp, rn({2, 3}, DType::Float64)));
  c.push_back(one("leaky_relu", [](const Tensor& t) { return leaky_relu(t, 0.125); }, x));
  c.push_back(one("gelu_erf", [](const Tensor& t) { return gelu(t); }, x * 3.0, false));
  c.push_back(one("gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApprox::Tanh); }, x * 3.0, false));
  c.push_back(unary("silu", silu, x * 3.0, false));
  c.push_back(one("softplus", [](const Tensor& t) { return softplus(t); }, x * 10.0, false));
  c.push_back(one("softplus_beta", [](const Tensor& t) { return softplus(t, 2.0, 5.0); }, x * 4.0, false));
  c.push_back(one("clamp", [](const Tensor& t) { return clamp(t, -0.5, 0.75); }, x));
  c.push_back(one("clamp_min_only", [](const Tensor& t) { return clamp(t, 0.25, std::nullopt); }, x));
  c.push_back(one("clamp_int64", [](const Tensor& t) { return clamp(t, -3, 4); }, ri(-9, 9, {6})));
  c.push_back(one("cast_f32_i64", [](const Tensor& t) { return cast(t, DType::Int64); }, x * 5.0));
  c.push_back(one("cast_f32_bool", [](const Tensor& t) { return cast(gt(t, zeros({})), DType::Float64); }, x));
  c.push_back(one("cast_u8", [](const Tensor& t) { return cast(cast(t, DType::UInt8), DType::Float32); }, un({6}, 0, 200)));
  // ---- elementwise, binary and ternary (with broadcasting)
  const Tensor y = rn({4});
  for (auto [name, f] : std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum},
           {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}}) {
    c.push_back(binary(name, f, x, y));
  }
  c.push_back(binary("eq_ties", eq, tensor({1.0, 2.0, 3.0}, DType::Float32), tensor({1.0, 0.0, 3.0}, DType::Float32)));
  c.push_back(binary("pow", pow, pos, y));
  c.push_back(binary("div_int64", div, ri(-90, 90, {8}), ri(1, 7, {8})));
  c.push_back({"where", [](const Ts& in, const Ts&) { return Ts{where(gt(in[0], in[1]), in[0], in[1] * 2.0)}; }, {x, y}});
  // ---- reductions
  c.push_back(one("sum", [](const Tensor& t) { return sum(t, {1}); }, x));
  c.push_back(one("sum_all", [](const Tensor& t) { return sum(t); }, x));
  c.push_back(one("sum_int64", [](const Tensor& t) { return sum(t, {0}, true); }, ri(-9, 9, {3, 2})));
  c.push_back(one("mean", [](const Tensor& t) { return mean(t, {0, 2}, true); }, rn({2, 3, 4})));
  c.push_back(one("amax", [](const Tensor& t) { return amax(t, {-1}); }, x));
  c.push_back(one("amin", [](const Tensor& t) { return amin(t, {0}, true); }, x));
  c.push_back(one("prod", [](const Tensor& t) { return prod(t, {1}); }, x));
  c.push_back(one("var", [](const Tensor& t) { return var(t, {1}); }, x, false));
  c.push_back(one("var_population_all", [](const Tensor& t) { return var(t, {}, 0, true); }, x, false));
  c.push_back(one("argmax", [](const Tensor& t) { return argmax(t, 1, true); }, x));
  c.push_back(one("softmax", [](const Tensor& t) { return softmax(t, 0); }, x));
  c.push_back(one("log_softmax", [](const Tensor& t) { return log_softmax(t, -1); }, x));
  c.push_back(one("cumsum", [](const Tensor& t) { return cumsum(t, 1); }, x));
  c.push_back(one("cumsum_exclusive_reverse", [](const Tensor& t) { return cumsum(t, 0, true, true); }, x));
  c.push_back({"topk", [](const Ts& in, const Ts&) {
                 TopKResult r = topk(in[0], 2, 1, true);
                 TopKResult s = topk(in[0], 1, 0, false);
                 return Ts{r.values, r.indices, s.values, s.indices};
               }, {x}});
  for (int64_t r = 0; r < 3; ++r) {
    c.push_back({"nll_loss_" + std::to_string(r), [r](const Ts& in, const Ts&) {
                   Tensor t = in[1];
                   return Ts{nll_loss(log_softmax(in[0], 1), t, 2, Reduction(r))};
                 }, {rn({5, 4}), ri(0, 4, {5})}, {}, false});
  }
  // ---- contractions, pooling, normalization
  c.push_back(binary("matmul", matmul, rn({2, 3, 4}), rn({4, 5})));
  c.push_back(binary("matmul_vector", matmul, rn({4}), rn({2, 4, 3})));
  c.push_back({"conv2d", [](const Ts& in, const Ts& p) { return Ts{conv2d(in[0], p[0], Tensor(), {2, 1}, {1, 2}, {1, 2})}; },
               {rn({2, 3, 7, 8})}, {rn({4, 3, 3, 2})}});
  c.push_back({"conv2d_groups_bias", [](const Ts& in, const Ts& p) { return Ts{conv2d(in[0], p[0], p[1], 1, 1, 1, 2)}; },
               {rn({1, 4, 5, 5})}, {rn({6, 2, 3, 3}), rn({6})}, false});
  c.push_back({"conv2d_grads", conv_grads, {rn({2, 3, 7, 6}), rn({4, 3, 3, 2}), rn({2, 4, 4, 4})}, {}, false});
  // 6 input channels, 9 output channels in 3 groups: x (N, 6, H, W), w (9, 2, kH, kW).
  c.push_back({"conv2d_grads_groups", conv_grads_groups3, {rn({2, 6, 7, 6}), rn({9, 2, 3, 2}), rn({2, 9, 4, 4})}, {},
               false});
  c.push_back(one("max_pool2d", [](const Tensor& t) { return max_pool2d(t, {3, 2}, {2, 1}, {1, 1}, {1, 2}); }, rn({2, 3, 7, 8})));
  c.push_back(one("avg_pool2d", [](const Tensor& t) { return avg_pool2d(t, 3, 2, 1, true); }, rn({2, 3, 7, 8}), false));
  c.push_back(one("avg_pool2d_no_pad", [](const Tensor& t) { return avg_pool2d(t, 2, 2, 0, false); }, rn({1, 2, 6, 6}), false));
  // Dilated: no AveragePool before opset 19, a Conv of ones over the tap counts instead.
  c.push_back(one("avg_pool2d_dilated", [](const Tensor& t) { return avg_pool2d(t, {3, 2}, {1, 2}, {2, 1}, true, {2, 3}); },
                  rn({2, 3, 9, 8}), false));
  c.push_back(one("avg_pool2d_dilated_no_pad_count", [](const Tensor& t) { return avg_pool2d(t, {3, 2}, {2, 1}, {2, 1}, false, {2, 3}); },
                  rn({1, 2, 9, 8}), false));
  c.push_back(one("adaptive_avg_pool2d_global", [](const Tensor& t) { return adaptive_avg_pool2d(t, 1); }, rn({2, 3, 5, 5}), false));
  c.push_back(one("adaptive_avg_pool2d_even", [](const Tensor& t) { return adaptive_avg_pool2d(t, {2, 3}); }, rn({1, 2, 4, 6}), false));
  c.push_back(one("adaptive_avg_pool2d_uneven", [](const Tensor& t) { return adaptive_avg_pool2d(t, {3, 2}); }, rn({1, 2, 7, 5}), false));
  c.push_back({"layer_norm", [](const Ts& in, const Ts& p) {
                 Ts r = ops::call(OpId::layer_norm, {in[0], p[0], p[1]}, {{"ndim", int64_t(2)}, {"eps", 1e-5}});
                 return r;  // y, mean, rstd
               }, {rn({2, 3, 4})}, {rn({3, 4}), rn({3, 4})}, false});
  Case ln16 = c.back();
  ln16.name = "layer_norm_opset16";
  ln16.opset = 16;
  c.push_back(ln16);
  c.push_back({"batch_norm_eval", [](const Ts& in, const Ts& p) {
                 return Ts{batch_norm(in[0], p[0], p[1], p[2], p[3], false, 0.1, 1e-3)};
               }, {rn({2, 3, 4, 4})}, {rn({3}), un({3}, 0.5, 2), rn({3}), rn({3})}, false});
  c.push_back({"batch_norm_train", [](const Ts& in, const Ts& p) {
                 BatchNormResult r = batch_norm_functional(in[0], p[0], p[1], p[2], p[3], true, 0.1, 1e-5);
                 return Ts{r.y, r.running_mean, r.running_var};
               }, {rn({4, 3, 2, 2})}, {rn({3}), un({3}, 0.5, 2), rn({3}), rn({3})}, false});
  c.push_back(one("dropout_eval", [](const Tensor& t) {
    const Tensor state = generator_state_tensor(GeneratorState{7, 0});
    return ops::call(OpId::dropout, {t, state}, {{"p", 0.5}, {"training", int64_t(0)}})[0];
  }, x));
  // ---- indexing, joining, views
  c.push_back({"embedding", [](const Ts& in, const Ts& p) { return Ts{embedding(in[0], p[0])}; },
               {ri(0, 10, {2, 3})}, {rn({10, 4})}});
  c.push_back({"index_select", [](const Ts& in, const Ts&) { return Ts{index_select(in[0], 1, in[1])}; },
               {x, ri(0, 4, {6})}});
  c.push_back({"index_add", index_add_fn, {rn({4, 3})}});
  // Before opset 16 a MatMul with one-hot rows: 2 + x where smelt adds 1 twice (rounding).
  c.push_back({"index_add_opset13", index_add_fn, {rn({4, 3})}, {}, false, 13});
  c.push_back({"index_add_dim1_opset15", [](const Ts& in, const Ts&) {
                 return Ts{index_add(in[0], 1, tensor({3, 0, 3, 1, 3}), in[1])};
               }, {rn({2, 4, 3}), rn({2, 5, 3})}, {}, false, 15});
  c.push_back({"gather", [](const Ts& in, const Ts&) { return Ts{gather(in[0], 1, in[1])}; }, {x, ri(0, 4, {3, 5})}});
  c.push_back({"scatter_add", [](const Ts& in, const Ts&) { return Ts{scatter_add(in[0], 0, in[1], in[2])}; },
               {x, ri(0, 3, {2, 4}), rn({2, 4})}});
  c.push_back({"scatter_add_larger_src", [](const Ts& in, const Ts&) { return Ts{scatter_add(in[0], 1, in[1], in[2])}; },
               {x, ri(0, 4, {2, 3}), rn({3, 5})}});
  c.push_back(one("one_hot", [](const Tensor& t) { return one_hot(t, 5); }, ri(0, 5, {2, 3})));
  c.push_back({"cat", [](const Ts& in, const Ts&) { return Ts{cat({in[0], in[1], in[0]}, -1)}; }, {x, rn({3, 2})}});
  c.push_back(one("reshape", [](const Tensor& t) { return t.reshape({2, 6}); }, x));
  c.push_back(one("reshape_empty", [](const Tensor& t) { return t.reshape({3, 0}); }, rn({0, 3})));
  c.push_back(one("permute_contiguous", [](const Tensor& t) {
    return ops::call1(OpId::contiguous, {t.permute({2, 0, 1})});
  }, rn({2, 3, 4})));
  c.push_back(one("slice", [](const Tensor& t) { return slice(t, 1, 1, 4, 2); }, x));
  c.push_back(one("expand", [](const Tensor& t) { return t.reshape({3, 1, 4}).expand({3, 2, 4}); }, x));
  for (auto [start, end, step] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 3, 1}, {1, 7, 3}, {0, 8, 4}, {2, 2, 2}}) {
    const ops::Attrs a{{"input_shape", std::vector<int64_t>{2, 8}}, {"dim", int64_t(1)}, {"start", start},
                       {"end", end}, {"step", step}};
    const int64_t n = end == start ? 0 : (end - start - 1) / step + 1;
    c.push_back({"slice_grad_" + std::to_string(start) + "_" + std::to_string(end) + "_" + std::to_string(step),
                 [a](const Ts& in, const Ts&) { return Ts{ops::call1(OpId::slice_grad, {in[0]}, a)}; }, {rn({2, n})}});
  }
  // ---- quantized inference: each op maps to its ONNX node and back, bit for bit
  {
    const Tensor s = full({}, 0.05, DType::Float32), zu = full({}, 3.0, DType::UInt8), zi = zeros({}, DType::Int8);
    const Tensor sc = from_vector(std::vector<float>{0.02f, 0.03f, 0.01f}, {3});
    const Tensor zc = zeros({3}, DType::Int8);
    const Tensor w = cast(ri(-100, 100, {4, 3}), DType::Int8), k = cast(ri(-50, 50, {3, 2, 3, 3}), DType::Int8);
    c.push_back(one("quantize_dequantize", [=](const Tensor& t) {
      return dequantize_linear(quantize_linear(t, s, zu), s, zu);
    }, rn({2, 5})));
    c.push_back(one("quantize_per_channel", [=](const Tensor& t) {
      return dequantize_linear(quantize_linear(t, sc, zc, 1), sc, zc, 1);
    }, rn({2, 3, 4})));
    c.push_back(one("qlinear_matmul", [=](const Tensor& t) {
      return dequantize_linear(qlinear_matmul({quantize_linear(t, s, zu), s, zu}, {w, sc, zc}, s, zu), s, zu);
    }, rn({2, 4})));
    c.push_back(one("matmul_integer", [=](const Tensor& t) {
      return matmul_integer(quantize_linear(t, s, zu), w, zu, zi);
    }, rn({5, 4})));
    QConvOptions o;
    o.padding = {1, 0, 0, 1};
    o.stride = {2, 1};
    c.push_back(one("qlinear_conv2d", [=](const Tensor& t) {
      const Tensor y = qlinear_conv2d({quantize_linear(t, s, zu), s, zu}, {k, sc, zc}, s, zu,
                                      cast(from_vector(std::vector<int64_t>{5, -9, 100}, {3}), DType::Int32), o);
      return dequantize_linear(y, s, zu);
    }, rn({1, 2, 6, 5})));
    c.push_back(one("conv2d_integer", [=](const Tensor& t) {
      return conv2d_integer(quantize_linear(t, s, zu), k, zu, zi, o);
    }, rn({1, 2, 5, 5})));
    // A linear layer's bias: QLinearMatMul has none, so the QDQ form (DequantizeLinear, MatMul,
    // Add, QuantizeLinear) in either export.
    const Tensor bias3 = cast(from_vector(std::vector<int64_t>{40, -7, 300}, {3}), DType::Int32);
    c.push_back(one("qlinear_matmul_bias", [=](const Tensor& t) {
      return dequantize_linear(qlinear_matmul({quantize_linear(t, s, zu), s, zu}, {w, sc, zc}, s, zu, bias3), s, zu);
    }, rn({2, 4})));
    // The QDQ form of the integer products.
    Case conv_qdq = one("qlinear_conv2d_qdq", [=](const Tensor& t) {
      const Tensor y = qlinear_conv2d({quantize_linear(t, s, zu), s, zu}, {k, sc, zc}, s, zu,
                                      cast(from_vector(std::vector<int64_t>{5, -9, 100}, {3}), DType::Int32), o);
      return dequantize_linear(y, s, zu);
    }, rn({1, 2, 6, 5}));
    conv_qdq.qdq = true;
    c.push_back(conv_qdq);
    Case matmul_qdq = one("qlinear_matmul_qdq", [=](const Tensor& t) {
      return dequantize_linear(qlinear_matmul({quantize_linear(t, s, zu), s, zu}, {w, sc, zc}, s, zu), s, zu);
    }, rn({3, 4}));
    matmul_qdq.qdq = true;
    c.push_back(matmul_qdq);
  }
  // ---- models
  c.push_back({"model_mlp", mlp, {rn({4, 8})},
               {rn({16, 8}) * 0.3, rn({16}), rn({16, 16}) * 0.3, rn({16}), rn({5, 16}) * 0.3, rn({5})}, false});
  c.push_back({"model_cnn", cnn, {rn({2, 3, 12, 12})},
               {rn({8, 3, 3, 3}) * 0.3, rn({8}), rn({8}) * 0.1, un({8}, 0.5, 2), un({8}, 0.5, 1.5), rn({8}),
                rn({8, 4, 3, 3}) * 0.3, rn({8}), rn({10, 8}) * 0.3, rn({10})},
               false});
  Case tb{"model_transformer_block", transformer, {rn({2, 5, 8})},
          {un({8}, 0.5, 1.5), rn({8}) * 0.1, rn({24, 8}) * 0.3, rn({24}) * 0.1, rn({8, 8}) * 0.3, rn({8}) * 0.1,
           un({8}, 0.5, 1.5), rn({8}) * 0.1, rn({16, 8}) * 0.3, rn({16}) * 0.1, rn({8, 16}) * 0.3, rn({8}) * 0.1},
          false};
  c.push_back(tb);
  for (int64_t opset : {13, 18}) {
    tb.name = "model_transformer_block_opset" + std::to_string(opset);
    tb.opset = opset;
    c.push_back(tb);
  }
  return c;
}

}  // namespace smelt::export_cases
