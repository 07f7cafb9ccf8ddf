// expand_quantize (passes/expand_quantize.h): per-tensor quantize/dequantize written out in
// elementwise primitives give the ops' exact bytes, on the values where rounding and saturation
// are decided (half steps, ±inf, NaN, ±0, subnormals, the dtype's edges), for both byte dtypes and
// zero points at their extremes; interpreted and compiled (fused into one kernel with the float
// op between them). Parameters the op would refuse keep the op, and its error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/graph.h"
#include "passes/expand_quantize.h"
#include "runtime/pipeline.h"
#include "runtime/plan.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"
#include "trace/interpreter.h"
#include "trace/trace.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::count_ops;
using testing::expect_same_bytes;

using ops::OpId;

// Values around every rounding and saturation decision of a scale s and zero point z.
Tensor edge_values(float s, int32_t z, DType dtype) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::nanf(""), -std::nanf(""), 1e-45f, -1e-45f, 1e-38f,
                          3e38f, -3e38f};
  for (int k = -300; k <= 300; k += 7) {
    for (float frac : {0.0f, 0.5f, -0.5f, 0.49999997f, 0.50000006f}) v.push_back((float(k) + frac) * s);
  }
  // the dtype's edges, in the quantized domain
  const int32_t lo = dtype == DType::UInt8 ? 0 : -128, hi = dtype == DType::UInt8 ? 255 : 127;
  for (int32_t q : {lo - 1, lo, hi, hi + 1}) {
    for (float frac : {-0.5f, 0.0f, 0.5f}) v.push_back((float(q - z) + frac) * s);
  }
  return from_vector(v, {int64_t(v.size())});
}

TEST(ExpandQuantize, SameBytesAsTheOpsInterpretedAndCompiled) {
  struct Case {
    DType dtype;
    int32_t zero_point;
    float scale;
  };
  const std::vector<Case> cases = {{DType::UInt8, 0, 0.1f},    {DType::UInt8, 255, 0.02f}, {DType::UInt8, 128, 3.0f},
                                   {DType::Int8, -128, 0.05f}, {DType::Int8, 127, 0.7f},   {DType::Int8, 0, 1e-3f}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " z=" << c.zero_point << " s=" << c.scale);
    const Tensor s = full({}, c.scale, DType::Float32), z = full({}, c.zero_point, c.dtype);
    const Tensor s2 = full({}, c.scale * 2, DType::Float32);
    // quantize, a float op between dequantize and quantize (as between quantized layers), and
    // the dequantized values as an output too
    auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      const Tensor q = quantize_linear(in[0], s, z);
      const Tensor f = dequantize_linear(q, s, z);
      const Tensor q2 = quantize_linear(relu(f + f), s2, z);
      return std::vector<Tensor>{q, f, q2, quantize_linear(in[1], s, z)};
    };
    const Tensor x = edge_values(c.scale, c.zero_point, c.dtype);
    const Tensor x64 = cast(x, DType::Float64);
    const std::vector<Tensor> inputs = {x, x64};
    auto graph = trace::trace(fn, inputs);
    const std::vector<Tensor> want = trace::interpret(*graph, inputs);
    auto expanded = graph->clone();
    ASSERT_TRUE(passes::expand_quantize(*expanded));
    EXPECT_EQ(count_ops(*expanded, OpId::quantize_linear) + count_ops(*expanded, OpId::dequantize_linear), 0);
    const std::vector<Tensor> got = trace::interpret(*expanded, inputs);
    for (size_t i = 0; i < want.size(); ++i) expect_same_bytes(want[i], got[i], "interpreted output " + std::to_string(i));
    // compiled (the default pipeline runs the pass; fusion merges the primitives)
    for (runtime::KernelBackend backend : {runtime::KernelBackend::Interpreter, runtime::KernelBackend::Compiled}) {
      runtime::PipelineOptions po;
      po.backend = backend;
      runtime::CompiledGraph compiled = runtime::compile_graph(graph->clone(), po);
      const std::vector<Tensor> planned = compiled.plan->run(inputs);
      for (size_t i = 0; i < want.size(); ++i) expect_same_bytes(want[i], planned[i], "compiled output " + std::to_string(i));
    }
  }
}

TEST(ExpandQuantize, ParametersTheOpRefusesOrPerAxisKeepTheOp) {
  const Tensor x = uniform({2, 3}, -1, 1, DType::Float32);
  for (float bad : {0.0f, -1.0f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    const Tensor s = full({}, bad, DType::Float32), z = zeros({}, DType::UInt8);
    ir::Graph g;
    ir::Value* in = g.add_input({{2, 3}, DType::Float32});
    ir::Node* q = g.add_node(OpId::quantize_linear, {in, g.add_constant(s), g.add_constant(z)}, {{"axis", int64_t(1)}});
    g.add_output(q->outputs[0]);
    EXPECT_FALSE(passes::expand_quantize(g)) << bad;
    EXPECT_EQ(count_ops(g, OpId::quantize_linear), 1);
    EXPECT_THROW(trace::interpret(g, {x}), Error);
  }
  // a scale shaped (1) with a rank-0 value: the expansion keeps the value's shape
  {
    ir::Graph g;
    ir::Value* in = g.add_input({{}, DType::UInt8});
    ir::Node* dq = g.add_node(OpId::dequantize_linear,
                              {in, g.add_constant(full({1}, 0.5, DType::Float32)), g.add_constant(full({}, 3, DType::UInt8))},
                              {{"axis", int64_t(1)}});
    ir::Node* q = g.add_node(OpId::quantize_linear, {dq->outputs[0], dq->inputs[1], dq->inputs[2]}, {{"axis", int64_t(1)}});
    g.add_output(dq->outputs[0]);
    g.add_output(q->outputs[0]);
    const std::vector<Tensor> inputs = {full({}, 200, DType::UInt8)};
    const std::vector<Tensor> want = trace::interpret(g, inputs);
    ASSERT_TRUE(passes::expand_quantize(g));
    const std::vector<Tensor> got = trace::interpret(g, inputs);
    for (size_t i = 0; i < want.size(); ++i) expect_same_bytes(want[i], got[i], "output " + std::to_string(i));
  }
  // per-axis parameters (three scales along dim 1)
  ir::Graph g;
  ir::Value* in = g.add_input({{2, 3}, DType::Float32});
  ir::Node* q = g.add_node(OpId::quantize_linear,
                           {in, g.add_constant(full({3}, 0.1, DType::Float32)), g.add_constant(zeros({3}, DType::Int8))},
                           {{"axis", int64_t(1)}});
  ir::Node* dq = g.add_node(OpId::dequantize_linear, {q->outputs[0], q->inputs[1], q->inputs[2]}, {{"axis", int64_t(1)}});
  g.add_output(dq->outputs[0]);
  EXPECT_FALSE(passes::expand_quantize(g));
}

}  // namespace
}  // namespace smelt
