// The quantize pass (quant/quantize_graph.h) on a small CNN: which products become integer ops,
// that uint8 flows between consecutive convolutions, that the quantized graph stays close to the
// float one (signal-to-quantization-noise ratio) for every threshold method, that interpreter and
// compiled plan agree bit for bit, and the calibration file's round trip and errors.
#include "quant/quantize_graph.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/graph.h"
#include "ir/printer.h"
#include "passes/dce.h"
#include "passes/fold.h"
#include "passes/sink_dequantize.h"
#include "runtime/pipeline.h"
#include "runtime/plan.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "trace/interpreter.h"
#include "trace/trace.h"
#include "support/helpers.h"

namespace smelt::quant {
namespace {

using testing::count_ops;

struct Net {
  Tensor w1, b1, w2, b2, w3, fc;
};

Net make_net() {
  Generator gen(42);
  Net n;
  n.w1 = uniform({8, 3, 3, 3}, -0.4, 0.4, DType::Float32, &gen);
  n.b1 = uniform({8, 1, 1}, -0.1, 0.1, DType::Float32, &gen);
  n.w2 = uniform({8, 8, 3, 3}, -0.2, 0.2, DType::Float32, &gen);
  n.b2 = uniform({8, 1, 1}, -0.1, 0.1, DType::Float32, &gen);
  n.w3 = uniform({4, 8, 1, 1}, -0.5, 0.5, DType::Float32, &gen);
  n.fc = uniform({4 * 5 * 5, 10}, -0.2, 0.2, DType::Float32, &gen);
  return n;
}

std::unique_ptr<ir::Graph> trace_net(const Net& n) {
  auto fn = [n](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor h = relu(conv2d(in[0], n.w1, Tensor(), {1, 1}, {1, 1}) + n.b1);
    h = relu(conv2d(h, n.w2, Tensor(), {2, 2}, {0, 0}) + n.b2);
    h = conv2d(h, n.w3, Tensor(), {1, 1}, {0, 0});
    return std::vector<Tensor>{matmul(h.reshape({h.size(0), -1}), n.fc)};
  };
  return trace::trace(fn, {zeros({2, 3, 11, 11})});
}

std::vector<std::vector<Tensor>> batches(int count, uint64_t seed) {
  Generator gen(seed);
  std::vector<std::vector<Tensor>> b;
  for (int i = 0; i < count; ++i) b.push_back({uniform({2, 3, 11, 11}, -1, 1, DType::Float32, &gen)});
  return b;
}

double sqnr_db(const Tensor& ref, const Tensor& got) {
  double signal = 0, noise = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.data<float>()[i], d = r - got.data<float>()[i];
    signal += r * r;
    noise += d * d;
  }
  return 10 * std::log10(signal / std::max(noise, 1e-30));
}

void expect_same_floats(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

TEST(QuantizeGraph, ConvolutionsAndTheMatmulBecomeIntegerOpsCloseToFloat) {
  const Net net = make_net();
  const auto calib = batches(4, 1), held_out = batches(1, 99);
  for (ThresholdMethod method :
       {ThresholdMethod::Max, ThresholdMethod::Percentile, ThresholdMethod::Entropy, ThresholdMethod::Mse}) {
    SCOPED_TRACE(method_name(method));
    auto graph = trace_net(net);
    ThresholdOptions options;
    options.method = method;
    const Calibration cal = calibrate(*graph, calib, options);
    EXPECT_EQ(cal.values.size(), 6u);  // x, the three conv chains' outputs, the matmul's input and output
    auto q = graph->clone();
    const QuantizeReport report = quantize_graph(*q, cal);
    EXPECT_EQ(report.quantized, 4) << report.str();
    EXPECT_EQ(count_ops(*q, ops::OpId::qlinear_conv2d), 3);
    EXPECT_EQ(count_ops(*q, ops::OpId::qlinear_matmul), 1);
    // uint8 passes straight from conv to conv: one quantize at the input, one before the matmul
    // (after the float reshape); no conv, relu or bias add left in float
    EXPECT_EQ(count_ops(*q, ops::OpId::quantize_linear), 2) << report.str();
    EXPECT_EQ(count_ops(*q, ops::OpId::conv2d), 0);
    EXPECT_EQ(count_ops(*q, ops::OpId::relu), 0);
    EXPECT_EQ(count_ops(*q, ops::OpId::add), 0);
    const Tensor want = trace::interpret(*graph, held_out[0])[0];
    const Tensor got = trace::interpret(*q, held_out[0])[0];
    EXPECT_GT(sqnr_db(want, got), 25.0);
    // the compiled plan runs the same integer kernels: bit for bit the interpreter's
    runtime::PipelineOptions po;
    po.backend = runtime::KernelBackend::Interpreter;
    runtime::CompiledGraph compiled = runtime::compile_graph(q->clone(), po);
    const Tensor planned = compiled.plan->run(held_out[0])[0];
    ASSERT_EQ(planned.shape(), got.shape());
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(planned.data<float>()[i], got.data<float>()[i]) << i;
  }
}

// A Fire module's shape (SqueezeNet): two convolutions concatenated, max-pooled, then another
// convolution. Both concatenated outputs take the last convolution's input calibration, so after
// the pipeline's sink_dequantize the concatenation and the pooling move bytes, with no quantize or
// dequantize between the products, and the compiled plan still gives the interpreter's bits.
TEST(QuantizeGraph, ConcatenatedOutputsShareTheReadersScaleAndStayBytes) {
  Generator gen(7);
  const Tensor wa = uniform({4, 3, 1, 1}, -0.5, 0.5, DType::Float32, &gen);
  const Tensor wb = uniform({5, 3, 3, 3}, -0.3, 0.3, DType::Float32, &gen);
  const Tensor wc = uniform({6, 9, 3, 3}, -0.2, 0.2, DType::Float32, &gen);
  auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    const Tensor a = relu(conv2d(in[0], wa, Tensor(), {1, 1}, {0, 0}));
    const Tensor b = relu(conv2d(in[0], wb, Tensor(), {1, 1}, {1, 1}));
    const Tensor pooled = max_pool2d(cat({a, b}, 1), {2, 2}, {2, 2}, {0, 0});
    return std::vector<Tensor>{conv2d(pooled, wc, Tensor(), {1, 1}, {1, 1})};
  };
  auto graph = trace::trace(fn, {zeros({2, 3, 11, 11})});
  const auto calib = batches(4, 3);
  Generator held(5);
  const std::vector<Tensor> input = {uniform({2, 3, 11, 11}, -1, 1, DType::Float32, &held)};
  const Calibration cal = calibrate(*graph, calib, {});
  auto q = graph->clone();
  const QuantizeReport report = quantize_graph(*q, cal);
  EXPECT_EQ(report.quantized, 3) << report.str();
  // the two concatenated outputs are requantized to one scale and zero point
  std::vector<const ir::Node*> convs;
  for (const auto& n : q->nodes()) {
    if (n->op == ops::OpId::qlinear_conv2d) convs.push_back(n.get());
  }
  ASSERT_EQ(convs.size(), 3u);
  EXPECT_EQ(convs[0]->inputs[6]->constant.to_vector(), convs[1]->inputs[6]->constant.to_vector());
  EXPECT_EQ(convs[0]->inputs[7]->constant.to_vector(), convs[1]->inputs[7]->constant.to_vector());
  const Tensor want = trace::interpret(*graph, input)[0];
  const Tensor got = trace::interpret(*q, input)[0];
  EXPECT_GT(sqnr_db(want, got), 25.0);
  // after sink_dequantize: no quantize or dequantize left between the products (one quantize of
  // the input, one dequantize of the output), and the concatenation and pooling on bytes
  auto sunk = q->clone();
  passes::sink_dequantize(*sunk);
  passes::dce(*sunk);
  int requantizes = 0, byte_cats = 0, byte_pools = 0;
  for (const auto& n : sunk->nodes()) {
    requantizes += n->op == ops::OpId::quantize_linear || n->op == ops::OpId::dequantize_linear;
    byte_cats += n->op == ops::OpId::cat && n->inputs[0]->meta.dtype == DType::UInt8;
    byte_pools += n->op == ops::OpId::max_pool2d && n->inputs[0]->meta.dtype == DType::UInt8;
  }
  EXPECT_EQ(byte_cats, 1);
  EXPECT_EQ(byte_pools, 1);
  EXPECT_EQ(requantizes, 2);
  expect_same_floats(got, trace::interpret(*sunk, input)[0]);
  runtime::PipelineOptions po;
  po.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph compiled = runtime::compile_graph(q->clone(), po);
  const Tensor planned = compiled.plan->run(input)[0];
  ASSERT_EQ(planned.shape(), got.shape());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(planned.data<float>()[i], got.data<float>()[i]) << i;
}

// Where an output keeps its own calibration: read by a concatenation and by something else (the
// other reader needs its own range), or rectified and concatenated with signed values (the shared
// range does not start at 0, so the relu could not fold): both products are still quantized.
TEST(QuantizeGraph, OutputsKeepTheirOwnCalibrationWhereSharingWouldNotFit) {
  Generator gen(11);
  const Tensor wa = uniform({4, 3, 1, 1}, -0.5, 0.5, DType::Float32, &gen);
  const Tensor wb = uniform({5, 3, 3, 3}, -0.3, 0.3, DType::Float32, &gen);
  const Tensor wc = uniform({6, 9, 3, 3}, -0.2, 0.2, DType::Float32, &gen);
  for (bool signed_partner : {false, true}) {
    SCOPED_TRACE(signed_partner ? "relu beside a signed value" : "a second reader");
    auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      const Tensor a = relu(conv2d(in[0], wa, Tensor(), {1, 1}, {0, 0}));
      Tensor b = conv2d(in[0], wb, Tensor(), {1, 1}, {1, 1});
      if (!signed_partner) b = relu(b);
      std::vector<Tensor> out{conv2d(cat({a, b}, 1), wc, Tensor(), {1, 1}, {1, 1})};
      if (!signed_partner) out.push_back(a * 2.0);  // a second reader of a
      return out;
    };
    auto graph = trace::trace(fn, {zeros({2, 3, 11, 11})});
    const Calibration cal = calibrate(*graph, batches(4, 3), {});
    // the first product's output: a relu read by the cat
    const ir::Value* a = nullptr;
    for (const auto& n : graph->nodes()) {
      if (n->op == ops::OpId::relu && !a) a = n->outputs[0];
    }
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(cal.values.count(a->id));
    const double own_scale = cal.values.at(a->id).params.scale;
    auto q = graph->clone();
    const QuantizeReport report = quantize_graph(*q, cal);
    EXPECT_EQ(report.quantized, 3) << report.str();
    const ir::Node* first = nullptr;
    for (const auto& n : q->nodes()) {
      if (n->op == ops::OpId::qlinear_conv2d && !first) first = n.get();
    }
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->inputs[6]->constant.to_vector()[0], float(own_scale));
  }
}

// A linear layer's bias (along the last dim) and a relu after it fold into qlinear_matmul, as a
// convolution's do: an MLP's layers become integer ops with nothing left in float between them.
TEST(QuantizeGraph, LinearLayersFoldTheirBiasAndRelu) {
  Generator gen(5);
  const Tensor w1 = uniform({12, 16}, -0.4, 0.4, DType::Float32, &gen), b1 = uniform({16}, -0.2, 0.2, DType::Float32, &gen);
  const Tensor w2 = uniform({16, 6}, -0.4, 0.4, DType::Float32, &gen), b2 = uniform({1, 6}, -0.2, 0.2, DType::Float32, &gen);
  auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{matmul(relu(matmul(in[0], w1) + b1), w2) + b2};
  };
  auto graph = trace::trace(fn, {zeros({4, 12})});
  std::vector<std::vector<Tensor>> calib;
  for (int i = 0; i < 4; ++i) calib.push_back({uniform({4, 12}, -1, 1, DType::Float32, &gen)});
  const std::vector<Tensor> held_out = {uniform({4, 12}, -1, 1, DType::Float32, &gen)};
  const Calibration cal = calibrate(*graph, calib, ThresholdOptions{});
  auto q = graph->clone();
  const QuantizeReport report = quantize_graph(*q, cal);
  EXPECT_EQ(report.quantized, 2) << report.str();
  EXPECT_EQ(report.layers[0].op, "matmul+bias+relu");
  EXPECT_EQ(report.layers[1].op, "matmul+bias");
  EXPECT_EQ(count_ops(*q, ops::OpId::qlinear_matmul), 2);
  for (ops::OpId op : {ops::OpId::add, ops::OpId::relu, ops::OpId::matmul}) {
    EXPECT_EQ(count_ops(*q, op), 0) << ops::op_info(op).name << "\n" << report.str();
  }
  const Tensor want = trace::interpret(*graph, held_out)[0];
  const Tensor got = trace::interpret(*q, held_out)[0];
  EXPECT_GT(sqnr_db(want, got), 25.0);
  runtime::PipelineOptions po;
  po.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph compiled = runtime::compile_graph(q->clone(), po);
  const Tensor planned = compiled.plan->run(held_out)[0];
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(planned.data<float>()[i], got.data<float>()[i]) << i;
}

// A ReLU6 as clamp(0, 6) and as ONNX's Clip imports it (maximum(., 0) then minimum(., 6)) folds
// into the requantization: its bound lies beyond the calibrated range, where uint8 saturates
// anyway. A bound inside the range (a calibration edited to a wider scale) is left float and
// reported.
TEST(QuantizeGraph, ReluSixFoldsWhereItsBoundIsBeyondTheRange) {
  const Net n = make_net();
  auto fn = [n](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor h = clamp(conv2d(in[0], n.w1, Tensor(), {1, 1}, {1, 1}) + n.b1, 0.0, 6.0);
    h = minimum(maximum(conv2d(h, n.w2, Tensor(), {2, 2}, {0, 0}) + n.b2, full({}, 0.0)), full({}, 6.0));
    return std::vector<Tensor>{conv2d(h, n.w3, Tensor(), {1, 1}, {0, 0})};
  };
  auto graph = trace::trace(fn, {zeros({2, 3, 11, 11})});
  const auto calib = batches(4, 3), held_out = batches(1, 98);
  const Calibration cal = calibrate(*graph, calib, ThresholdOptions{});
  auto q = graph->clone();
  const QuantizeReport report = quantize_graph(*q, cal);
  EXPECT_EQ(report.quantized, 3) << report.str();
  for (ops::OpId op : {ops::OpId::clamp, ops::OpId::maximum, ops::OpId::minimum, ops::OpId::conv2d}) {
    EXPECT_EQ(count_ops(*q, op), 0) << ops::op_info(op).name << "\n" << report.str();
  }
  EXPECT_EQ(report.layers[0].op, "conv2d+bias+relu(max 6)");
  // (three requantized convolutions, the last one's output signed: a lower bound than the net
  // above, whose last layer is a matmul over 100 features)
  const Tensor want = trace::interpret(*graph, held_out[0])[0];
  EXPECT_GT(sqnr_db(want, trace::interpret(*q, held_out[0])[0]), 20.0);

  // the first chain's output given a scale at which 6 is only 6 levels: not folded
  Calibration wide = cal;
  const int first_chain = report.layers[0].float_value;
  wide.values.at(first_chain).params.scale = 1.0f;
  auto kept = graph->clone();
  const QuantizeReport partial = quantize_graph(*kept, wide);
  EXPECT_EQ(partial.quantized, 2) << partial.str();
  EXPECT_EQ(count_ops(*kept, ops::OpId::clamp), 1);
  ASSERT_EQ(partial.skipped.size(), 1u);
  EXPECT_NE(partial.skipped[0].find("upper bound 6"), std::string::npos) << partial.skipped[0];
}

// A residual: the add reads the block input back from its quantized form (the uint8 value the
// convolution reads), so the float block input has one reader, its quantize_linear.
TEST(QuantizeGraph, OtherReadersOfAQuantizedActivationReadItsQuantizedForm) {
  const Net n = make_net();
  auto fn = [n](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    const Tensor h = relu(conv2d(in[0], n.w1, Tensor(), {1, 1}, {1, 1}) + n.b1);
    // a block output computed by float ops, read by the next convolution and the next residual
    const Tensor s = relu(conv2d(h, n.w2, Tensor(), {1, 1}, {1, 1}) + h);
    return std::vector<Tensor>{conv2d(s, n.w2, Tensor(), {1, 1}, {1, 1}) + s};
  };
  auto graph = trace::trace(fn, {zeros({2, 3, 11, 11})});
  const Calibration cal = calibrate(*graph, batches(3, 5), ThresholdOptions{});
  auto q = graph->clone();
  const QuantizeReport report = quantize_graph(*q, cal);
  EXPECT_EQ(report.quantized, 3) << report.str();
  const ir::Node* add = nullptr;  // the last one, graph order
  for (const auto& node : q->nodes()) {
    if (node->op == ops::OpId::add) add = node.get();
  }
  ASSERT_NE(add, nullptr);
  // both operands of the last residual add come from dequantize_linear of a uint8 value: the
  // convolution's, and s read back from the quantized form the convolution reads
  for (const ir::Value* operand : add->inputs) {
    ASSERT_NE(operand->producer, nullptr);
    EXPECT_EQ(operand->producer->op, ops::OpId::dequantize_linear) << ir::value_ref(operand);
  }
  // and every quantize_linear's float input has that quantize as its only reader
  for (const auto& node : q->nodes()) {
    if (node->op == ops::OpId::quantize_linear) {
      EXPECT_EQ(node->inputs[0]->uses.size(), 1u);
    }
  }
  const Tensor want = trace::interpret(*graph, batches(1, 77)[0])[0];
  EXPECT_GT(sqnr_db(want, trace::interpret(*q, batches(1, 77)[0])[0]), 20.0);
}

TEST(QuantizeGraph, CalibrationFileRoundTripsAndRefusesNonsense) {
  auto graph = trace_net(make_net());
  const Calibration cal = calibrate(*graph, batches(2, 3), {});
  const Calibration back = Calibration::from_json(cal.to_json());
  ASSERT_EQ(back.values.size(), cal.values.size());
  for (const auto& [id, v] : cal.values) {
    const CalibratedValue& b = back.values.at(id);
    EXPECT_EQ(b.params.scale, v.params.scale);
    EXPECT_EQ(b.params.zero_point, v.params.zero_point);
    EXPECT_EQ(b.threshold, v.threshold);
  }
  EXPECT_EQ(back.options.method, ThresholdMethod::Entropy);
  // the same graph quantized from the file gives the same bytes
  auto q1 = graph->clone(), q2 = graph->clone();
  quantize_graph(*q1, cal);
  quantize_graph(*q2, back);
  const auto x = batches(1, 5)[0];
  const Tensor a = trace::interpret(*q1, x)[0], b = trace::interpret(*q2, x)[0];
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]);
  EXPECT_THROW(Calibration::from_json("{"), Error);
  EXPECT_THROW(Calibration::from_json(R"({"method": "kl", "percentile": 1, "batches": 1, "values": {}})"), Error);
  std::string bad = cal.to_json();
  const size_t at = bad.find("\"scale\": ");
  bad.replace(at, bad.find(',', at) - at, "\"scale\": -1");
  EXPECT_THROW(Calibration::from_json(bad), Error);
  EXPECT_THROW(calibrate(*graph, {}, {}), Error);
}

TEST(QuantizeGraph, AnInfiniteActivationIsACalibrationErrorNamingTheValue) {
  auto graph = trace_net(make_net());
  auto b = batches(1, 7);
  b[0][0].data<float>()[3] = INFINITY;
  try {
    calibrate(*graph, b, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calibration of %"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace smelt::quant
