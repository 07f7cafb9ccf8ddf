// fold_qdq (passes/fold_qdq.h): a QDQ model's dequantize -> conv2d / matmul -> quantize chains
// become qlinear_conv2d / qlinear_matmul. On random inputs the folded graph's bytes are the float
// chain's, or one step away where the float sum lies within its rounding of a half step (counted:
// a few in ten thousand), for both byte dtypes, per-tensor and per-channel weights, the bias forms
// quantizers write (int32 at sx * sw, int32 at another scale, float), the rectifiers requantization
// takes, strides, padding, dilation and groups; interpreted and compiled through the default
// pipeline; through an ONNX file (the importer keeps the weights' dequantize as nodes). The chains
// it must leave float are left float.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/graph.h"
#include "passes/fold_qdq.h"
#include "runtime/pipeline.h"
#include "runtime/plan.h"
#include "smelt/creation.h"
#include "smelt/graph.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

using ops::OpId;

enum class Bias { None, ExactInt32, OtherScaleInt32, Float };
enum class Rect { None, Relu, Relu6, MaxMin };

struct Chain {
  DType act = DType::UInt8;  // x's and y's dtype
  bool per_channel = true;
  Bias bias = Bias::ExactInt32;
  Rect rect = Rect::Relu;
  int64_t stride = 1, padding = 1, dilation = 1, groups = 1;
  int64_t c = 8, o = 16, k = 3;
};

ir::Value* scalar(ir::Graph& g, double v, DType t) { return g.add_constant(full({}, v, t)); }

Tensor random_ints(const Shape& shape, DType dtype, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = double(lo + int64_t(rng() % uint64_t(hi - lo + 1)));
  return from_vector(v, shape).to(dtype);
}

// x -> quantize -> dequantize -> conv2d(., dequantize(W)) [+ bias] [rectifier] -> quantize -> (bytes out)
std::unique_ptr<ir::Graph> conv_chain(const Chain& ch, uint64_t seed) {
  auto g = std::make_unique<ir::Graph>();
  const bool u8 = ch.act == DType::UInt8;
  const double sx = 0.021, sy = 0.043;
  const int64_t zx = u8 ? 120 : -5, zy = u8 ? (ch.rect == Rect::None ? 128 : 0) : (ch.rect == Rect::None ? 3 : -128);
  ir::Value* x = g->add_input({{2, ch.c, 11, 13}, DType::Float32}, "x");
  ir::Value* sxv = scalar(*g, sx, DType::Float32);
  ir::Value* zxv = scalar(*g, double(zx), ch.act);
  ir::Node* qx = g->add_node(OpId::quantize_linear, {x, sxv, zxv}, {{"axis", int64_t(1)}});
  ir::Node* dx = g->add_node(OpId::dequantize_linear, {qx->outputs[0], sxv, zxv}, {{"axis", int64_t(1)}});
  const Tensor wq = random_ints({ch.o, ch.c / ch.groups, ch.k, ch.k}, DType::Int8, -127, 127, seed);
  std::vector<float> sw;
  for (int64_t i = 0; i < ch.o; ++i) sw.push_back(float(0.002 + 0.0003 * double((i * 7 + int64_t(seed)) % 11)));
  ir::Value* swv = ch.per_channel ? g->add_constant(from_vector(sw, {ch.o})) : scalar(*g, sw[0], DType::Float32);
  ir::Value* zwv = ch.per_channel ? g->add_constant(zeros({ch.o}, DType::Int8)) : scalar(*g, 0, DType::Int8);
  if (!ch.per_channel) sw.assign(size_t(ch.o), sw[0]);
  ir::Node* dw = g->add_node(OpId::dequantize_linear, {g->add_constant(wq), swv, zwv}, {{"axis", int64_t(0)}});
  ir::Node* conv = g->add_node(OpId::conv2d, {dx->outputs[0], dw->outputs[0]},
                               {{"stride", std::vector<int64_t>{ch.stride, ch.stride}},
                                {"padding", std::vector<int64_t>{ch.padding, ch.padding}},
                                {"dilation", std::vector<int64_t>{ch.dilation, ch.dilation}},
                                {"groups", ch.groups}});
  ir::Value* y = conv->outputs[0];
  if (ch.bias != Bias::None) {
    ir::Value* b;
    if (ch.bias == Bias::Float) {
      b = g->add_constant(mul(random_ints({ch.o}, DType::Float32, -40, 40, seed + 1), scalar_tensor(0.01)));
    } else {
      std::vector<float> sb;
      for (float s : sw) sb.push_back(ch.bias == Bias::ExactInt32 ? float(sx) * s : float(sx) * s * 1.37f);
      ir::Node* db = g->add_node(OpId::dequantize_linear,
                                 {g->add_constant(random_ints({ch.o}, DType::Int32, -3000, 3000, seed + 2)),
                                  g->add_constant(from_vector(sb, {ch.o})), g->add_constant(zeros({ch.o}, DType::Int32))},
                                 {{"axis", int64_t(0)}});
      b = db->outputs[0];
    }
    ir::Node* r = g->add_node(OpId::reshape, {b}, {{"shape", Shape{1, ch.o, 1, 1}}});
    y = g->add_node(OpId::add, {y, r->outputs[0]})->outputs[0];
  }
  if (ch.rect == Rect::Relu) y = g->add_node(OpId::relu, {y})->outputs[0];
  if (ch.rect == Rect::Relu6) y = g->add_node(OpId::clamp, {y}, {{"min", 0.0}, {"max", 100.0}})->outputs[0];
  if (ch.rect == Rect::MaxMin) {
    y = g->add_node(OpId::maximum, {y, scalar(*g, 0, DType::Float32)})->outputs[0];
    y = g->add_node(OpId::minimum, {y, scalar(*g, 100, DType::Float32)})->outputs[0];
  }
  ir::Node* qy = g->add_node(OpId::quantize_linear, {y, scalar(*g, sy, DType::Float32), scalar(*g, double(zy), ch.act)},
                             {{"axis", int64_t(1)}});
  g->add_output(qy->outputs[0]);
  return g;
}

int count(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

// Elements of two byte tensors more than one step apart (an error), and one step apart.
std::pair<int64_t, int64_t> step_differences(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  int64_t far = 0, one = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    far += d > 1;
    one += d == 1;
  }
  return {far, one};
}

void expect_folds_within_a_step(const Chain& ch, uint64_t seed) {
  auto graph = conv_chain(ch, seed);
  auto folded = graph->clone();
  ASSERT_TRUE(passes::fold_qdq(*folded));
  EXPECT_EQ(count(*folded, OpId::qlinear_conv2d), 1);
  EXPECT_EQ(count(*folded, OpId::conv2d), 0);
  EXPECT_EQ(count(*folded, OpId::relu) + count(*folded, OpId::clamp) + count(*folded, OpId::maximum), 0);
  manual_seed(seed);
  const std::vector<Tensor> in = {normal({2, ch.c, 11, 13}, 0.3, 1.2, DType::Float32)};
  const Tensor want = trace::interpret(*graph, in)[0];
  const Tensor got = trace::interpret(*folded, in)[0];
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const auto [far, one] = step_differences(got, want);
  EXPECT_EQ(far, 0);
  // The float chain rounds its sum (measured: no byte of 160k differs with an exact or no bias); a
  // bias at another scale or in float is rounded to the integer units too (2-4 in 10,000 differ).
  const bool exact_bias = ch.bias == Bias::None || ch.bias == Bias::ExactInt32;
  EXPECT_LE(one, want.numel() / (exact_bias ? 2000 : 500) + 1) << one << " of " << want.numel() << " one step apart";
  // Compiled through the default pipeline (fold_qdq in it): the folded graph's bytes.
  runtime::PipelineOptions po;
  po.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph compiled = runtime::compile_graph(graph->clone(), po);
  const Tensor plan = compiled.plan->run(in)[0];
  EXPECT_EQ(step_differences(plan, got), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST(FoldQdq, ConvChainsFoldWithinOneStepOfTheFloatChain) {
  uint64_t seed = 10;
  for (DType act : {DType::UInt8, DType::Int8}) {
    for (bool per_channel : {true, false}) {
      for (Bias bias : {Bias::None, Bias::ExactInt32, Bias::OtherScaleInt32, Bias::Float}) {
        for (Rect rect : {Rect::None, Rect::Relu, Rect::Relu6, Rect::MaxMin}) {
          Chain ch;
          ch.act = act, ch.per_channel = per_channel, ch.bias = bias, ch.rect = rect;
          SCOPED_TRACE(::testing::Message() << dtype_name(act) << (per_channel ? " per channel" : " per tensor")
                                          << " bias " << int(bias) << " rect " << int(rect));
          expect_folds_within_a_step(ch, ++seed);
        }
      }
    }
  }
}

TEST(FoldQdq, ConvGeometriesFold) {
  uint64_t seed = 100;
  for (const auto& [stride, padding, dilation, groups] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{{2, 1, 1, 1}, {1, 0, 1, 1}, {1, 2, 2, 1},
                                                                   {1, 1, 1, 2}, {2, 1, 1, 8}, {3, 2, 1, 4}}) {
    Chain ch;
    ch.stride = stride, ch.padding = padding, ch.dilation = dilation, ch.groups = groups;
    if (groups == 8) ch.o = 8;  // depthwise
    SCOPED_TRACE(::testing::Message() << "stride " << stride << " padding " << padding << " dilation " << dilation
                                    << " groups " << groups);
    expect_folds_within_a_step(ch, ++seed);
  }
}

TEST(FoldQdq, ChainsThatMustStayFloatAreLeftAlone) {
  // A relu whose output's zero point is not the dtype's minimum: requantization cannot clamp at 0.
  Chain relu;
  auto g = conv_chain(relu, 1);
  for (const auto& n : g->nodes()) {
    if (n->op == OpId::quantize_linear && n->inputs[0]->producer && n->inputs[0]->producer->op == OpId::relu) {
      g->set_input(n.get(), 2, scalar(*g, 7, DType::UInt8));
    }
  }
  EXPECT_FALSE(passes::fold_qdq(*g));
  // A bound inside the output's range (clamp(0, 1) at scale 0.043 is 23 steps of 255).
  Chain bound;
  bound.rect = Rect::Relu6;
  g = conv_chain(bound, 2);
  for (const auto& n : g->nodes()) {
    if (n->op == OpId::clamp) n->attrs.set("max", 1.0);
  }
  EXPECT_FALSE(passes::fold_qdq(*g));
  // The float product read by something else as well.
  Chain shared;
  shared.bias = Bias::None;
  shared.rect = Rect::None;
  g = conv_chain(shared, 3);
  for (const auto& n : g->nodes()) {
    if (n->op == OpId::conv2d) g->add_output(n->outputs[0]);
  }
  EXPECT_FALSE(passes::fold_qdq(*g));
  // A weight that is not a constant.
  auto h = std::make_unique<ir::Graph>();
  ir::Value* x = h->add_input({{1, 4, 5, 5}, DType::UInt8});
  ir::Value* w = h->add_input({{4, 4, 3, 3}, DType::Int8});
  ir::Value* s = scalar(*h, 0.1, DType::Float32);
  ir::Node* dx = h->add_node(OpId::dequantize_linear, {x, s, scalar(*h, 0, DType::UInt8)}, {{"axis", int64_t(1)}});
  ir::Node* dw = h->add_node(OpId::dequantize_linear, {w, s, scalar(*h, 0, DType::Int8)}, {{"axis", int64_t(0)}});
  ir::Node* c = h->add_node(OpId::conv2d, {dx->outputs[0], dw->outputs[0]},
                            {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}},
                             {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}});
  h->add_output(h->add_node(OpId::quantize_linear, {c->outputs[0], s, scalar(*h, 0, DType::UInt8)},
                            {{"axis", int64_t(1)}})->outputs[0]);
  EXPECT_FALSE(passes::fold_qdq(*h));
}

// x -> Q -> DQ -> matmul(., W) [+ bias, relu] -> Q, W = DQ(Wq (K, N)) per column or
// permute(DQ(Wq (N, K))) per row, the bias a dequantized int32 (N) at sx * sw.
TEST(FoldQdq, MatmulChainsFoldWithPlainAndTransposedWeights) {
  for (bool transposed : {false, true}) {
    for (DType act : {DType::UInt8, DType::Int8}) {
      for (bool linear : {false, true}) {
        SCOPED_TRACE(::testing::Message() << (transposed ? "transposed " : "plain ") << dtype_name(act)
                                        << (linear ? " bias relu" : ""));
        auto g = std::make_unique<ir::Graph>();
        const int64_t k = 24, n = 10, zx = act == DType::UInt8 ? 128 : 0;
        ir::Value* x = g->add_input({{3, 5, k}, DType::Float32}, "x");
        ir::Value* sx = scalar(*g, 0.03, DType::Float32);
        ir::Value* zxv = scalar(*g, double(zx), act);
        ir::Node* qx = g->add_node(OpId::quantize_linear, {x, sx, zxv}, {{"axis", int64_t(1)}});
        ir::Node* dx = g->add_node(OpId::dequantize_linear, {qx->outputs[0], sx, zxv}, {{"axis", int64_t(1)}});
        const Tensor wq = random_ints(transposed ? Shape{n, k} : Shape{k, n}, DType::Int8, -127, 127, 5);
        std::vector<float> sw;
        for (int64_t i = 0; i < n; ++i) sw.push_back(0.004f + 0.001f * float(i % 3));
        ir::Node* dw = g->add_node(OpId::dequantize_linear,
                                   {g->add_constant(wq), g->add_constant(from_vector(sw, {n})),
                                    g->add_constant(zeros({n}, DType::Int8))},
                                   {{"axis", int64_t(transposed ? 0 : 1)}});
        ir::Value* w = dw->outputs[0];
        if (transposed) w = g->add_node(OpId::permute, {w}, {{"dims", std::vector<int64_t>{1, 0}}})->outputs[0];
        ir::Value* y = g->add_node(OpId::matmul, {dx->outputs[0], w})->outputs[0];
        ir::Value* zy = zxv;
        if (linear) {
          std::vector<float> sb;
          for (float s : sw) sb.push_back(0.03f * s);
          ir::Node* db = g->add_node(OpId::dequantize_linear,
                                     {g->add_constant(random_ints({n}, DType::Int32, -2000, 2000, 6)),
                                      g->add_constant(from_vector(sb, {n})), g->add_constant(zeros({n}, DType::Int32))},
                                     {{"axis", int64_t(0)}});
          y = g->add_node(OpId::relu, {g->add_node(OpId::add, {y, db->outputs[0]})->outputs[0]})->outputs[0];
          zy = scalar(*g, act == DType::UInt8 ? 0 : -128, act);
        }
        g->add_output(g->add_node(OpId::quantize_linear, {y, scalar(*g, 0.05, DType::Float32), zy},
                                  {{"axis", int64_t(1)}})->outputs[0]);
        auto folded = g->clone();
        ASSERT_TRUE(passes::fold_qdq(*folded));
        EXPECT_EQ(count(*folded, OpId::qlinear_matmul), 1);
        EXPECT_EQ(count(*folded, OpId::matmul) + count(*folded, OpId::add) + count(*folded, OpId::relu), 0);
        manual_seed(7);
        const std::vector<Tensor> in = {normal({3, 5, k}, 0, 1.5, DType::Float32)};
        const auto [far, one] = step_differences(trace::interpret(*folded, in)[0], trace::interpret(*g, in)[0]);
        EXPECT_EQ(far, 0);
        EXPECT_LE(one, 2);
      }
    }
  }
}

// A matmul whose output passes through a sigmoid before its quantize stays float; its weight's
// dequantize, larger than fold's limit, is computed once when the plan is built, not on every run.
TEST(FoldQdq, AnUnfoldedWeightIsDequantizedOnceNotPerRun) {
  auto g = std::make_unique<ir::Graph>();
  const int64_t k = 320, n = 300;  // 96000 weights: above fold's 65536
  ir::Value* x = g->add_input({{4, k}, DType::Float32}, "x");
  ir::Value* sx = scalar(*g, 0.03, DType::Float32);
  ir::Value* zx = scalar(*g, 128, DType::UInt8);
  ir::Node* qx = g->add_node(OpId::quantize_linear, {x, sx, zx}, {{"axis", int64_t(1)}});
  ir::Node* dx = g->add_node(OpId::dequantize_linear, {qx->outputs[0], sx, zx}, {{"axis", int64_t(1)}});
  ir::Node* dw = g->add_node(OpId::dequantize_linear,
                             {g->add_constant(random_ints({k, n}, DType::Int8, -127, 127, 9)),
                              scalar(*g, 0.01, DType::Float32), scalar(*g, 0, DType::Int8)},
                             {{"axis", int64_t(1)}});
  ir::Node* mm = g->add_node(OpId::matmul, {dx->outputs[0], dw->outputs[0]});
  ir::Node* sigmoid = g->add_node(OpId::sigmoid, {mm->outputs[0]});
  g->add_output(g->add_node(OpId::quantize_linear, {sigmoid->outputs[0], scalar(*g, 0.004, DType::Float32), zx},
                            {{"axis", int64_t(1)}})->outputs[0]);
  auto folded = g->clone();
  EXPECT_FALSE(passes::fold_qdq(*folded));
  runtime::PipelineOptions po;
  po.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph compiled = runtime::compile_graph(g->clone(), po);
  EXPECT_GE(compiled.plan->stats().hoisted, 1);
  for (const auto& node : compiled.graph->nodes()) {
    const bool of_constant = node->op == OpId::dequantize_linear && node->inputs[0]->kind == ir::ValueKind::Constant;
    EXPECT_FALSE(of_constant) << "a weight's dequantize is a step of the plan";
  }
  manual_seed(3);
  const std::vector<Tensor> in = {normal({4, k}, 0, 1, DType::Float32)};
  EXPECT_EQ(step_differences(compiled.plan->run(in)[0], trace::interpret(*g, in)[0]),
            (std::pair<int64_t, int64_t>{0, 0}));
}

// Through an ONNX file: smelt's export writes the chain's nodes; the importer computes the weight's
// DequantizeLinear as it computes every node of known inputs, then gives the conv a
// dequantize_linear node of the integers again (onnx/quantized_weights.h); the default pipeline
// folds the chain.
TEST(FoldQdq, AnImportedQdqModelRunsTheIntegerConvolution) {
  Chain ch;
  Graph g(conv_chain(ch, 21));
  const std::string bytes = onnx::save_bytes(g);
  onnx::Model m = onnx::import_model_bytes(bytes);
  EXPECT_EQ(count(m.graph.ir_graph(), OpId::dequantize_linear), 2);  // x and the weight
  Graph optimized(m.graph.ir_graph().clone());
  optimized.optimize();
  EXPECT_EQ(count(optimized.ir_graph(), OpId::qlinear_conv2d), 1);
  EXPECT_EQ(count(optimized.ir_graph(), OpId::conv2d), 0);
  manual_seed(22);
  const std::vector<Tensor> in = {normal({2, ch.c, 11, 13}, 0.3, 1.2, DType::Float32)};
  const auto [far, one] = step_differences(optimized.run(in)[0], g.run(in)[0]);
  EXPECT_EQ(far, 0);
  EXPECT_LE(one, 20);
}

}  // namespace
}  // namespace smelt
