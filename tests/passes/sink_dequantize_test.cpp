// sink_dequantize (passes/sink_dequantize.h): max pooling of a dequantized value becomes pooling
// of the bytes then dequantizing, with the same bits, for both byte dtypes, pooling geometries
// with padding and strides, scales where levels overflow to inf or sit among the subnormals,
// interpreted and compiled (the byte kernels with and without indices); a concatenation of
// values dequantized alike concatenates the bytes; a quantize of a dequantize with the same
// parameters is its bytes, for every byte; and where a rewrite would not be exact (indices read,
// dilation, inputs dequantized differently, a scale whose levels overflow) it leaves the graph.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ir/graph.h"
#include "passes/dce.h"
#include "passes/sink_dequantize.h"
#include "runtime/pipeline.h"
#include "runtime/plan.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::expect_same_bytes;

using ops::OpId;

Tensor random_bytes(const Shape& shape, DType dtype, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Tensor t = empty(shape, dtype);
  uint8_t* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = uint8_t(rng());
  return t;
}

struct Pool {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

// q -> dequantize_linear -> max_pool2d (values; indices read when `read_indices`) -> output.
std::unique_ptr<ir::Graph> pool_graph(DType dtype, float scale, int32_t zero_point, const Pool& p, bool read_indices) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* q = g->add_input({{2, 3, 9, 11}, dtype});
  ir::Node* dq = g->add_node(OpId::dequantize_linear,
                             {q, g->add_constant(full({}, scale, DType::Float32)), g->add_constant(full({}, zero_point, dtype))},
                             {{"axis", int64_t(1)}});
  ops::Attrs attrs{{"kernel", p.kernel}, {"stride", p.stride}, {"padding", p.padding}};
  if (!p.dilation.empty()) attrs.set("dilation", p.dilation);
  ir::Node* pool = g->add_node(OpId::max_pool2d, {dq->outputs[0]}, attrs);
  g->add_output(pool->outputs[0]);
  if (read_indices) g->add_output(pool->outputs[1]);
  return g;
}

TEST(SinkDequantize, PoolingTheBytesGivesTheSameBits) {
  const std::vector<Pool> pools = {{{3, 3}, {2, 2}, {1, 1}, {}}, {{2, 2}, {2, 2}, {0, 0}, {}},
                                   {{3, 2}, {1, 1}, {1, 0}, {1, 1}}, {{5, 5}, {3, 2}, {2, 2}, {}}};
  int seed = 0;
  for (DType dtype : {DType::UInt8, DType::Int8}) {
    for (float scale : {0.05f, 3e38f, 1e-42f}) {
      for (const Pool& p : pools) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " scale " << scale << " kernel " << p.kernel[0] << "x"
                                        << p.kernel[1]);
        const int32_t zero_point = dtype == DType::UInt8 ? 131 : -7;
        auto graph = pool_graph(dtype, scale, zero_point, p, false);
        const std::vector<Tensor> in = {random_bytes({2, 3, 9, 11}, dtype, uint64_t(++seed))};
        const Tensor want = trace::interpret(*graph, in)[0];
        auto sunk = graph->clone();
        ASSERT_TRUE(passes::sink_dequantize(*sunk));
        int byte_pools = 0;
        for (const auto& n : sunk->nodes()) byte_pools += n->op == OpId::max_pool2d && n->inputs[0]->meta.dtype == dtype;
        EXPECT_EQ(byte_pools, 1);
        expect_same_bytes(want, trace::interpret(*sunk, in)[0], "interpreted");
        runtime::PipelineOptions po;
        po.backend = runtime::KernelBackend::Interpreter;
        runtime::CompiledGraph compiled = runtime::compile_graph(graph->clone(), po);
        expect_same_bytes(want, compiled.plan->run(in)[0], "compiled");
      }
    }
  }
}

// q1, q2 -> dequantize_linear each (scales and zero points given per input) -> cat(dim 1) ->
// output, and, when `requantize`, quantize_linear with the first input's parameters after it.
std::unique_ptr<ir::Graph> cat_graph(DType dtype, std::vector<float> scales, std::vector<int32_t> zero_points,
                                     bool requantize) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> parts;
  for (size_t i = 0; i < scales.size(); ++i) {
    ir::Value* q = g->add_input({{2, 3 + int64_t(i), 5, 4}, dtype});
    ir::Node* dq = g->add_node(OpId::dequantize_linear,
                               {q, g->add_constant(full({}, scales[i], DType::Float32)),
                                g->add_constant(full({}, zero_points[i], dtype))},
                               {{"axis", int64_t(1)}});
    parts.push_back(dq->outputs[0]);
  }
  ir::Node* cat = g->add_node(OpId::cat, parts, {{"dim", int64_t(1)}});
  ir::Value* out = cat->outputs[0];
  if (requantize) {
    out = g->add_node(OpId::quantize_linear,
                      {out, g->add_constant(full({}, scales[0], DType::Float32)),
                       g->add_constant(full({}, zero_points[0], dtype))},
                      {{"axis", int64_t(1)}})->outputs[0];
  }
  g->add_output(out);
  return g;
}

TEST(SinkDequantize, ConcatenatingAndRequantizingBytesGivesTheSameBits) {
  int seed = 100;
  for (DType dtype : {DType::UInt8, DType::Int8}) {
    // levels in the normal range, among the subnormals, and at the largest scale that stays exact
    for (float scale : {0.05f, 1e-42f, 1.3e36f}) {
      for (bool requantize : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " scale " << scale << " requantize " << requantize);
        const int32_t zero_point = dtype == DType::UInt8 ? 131 : -7;
        auto graph = cat_graph(dtype, {scale, scale, scale}, {zero_point, zero_point, zero_point}, requantize);
        std::vector<Tensor> in;
        for (int64_t i = 0; i < 3; ++i) in.push_back(random_bytes({2, 3 + i, 5, 4}, dtype, uint64_t(++seed)));
        // every byte value, in the first input
        for (int64_t b = 0; b < 256; ++b) static_cast<uint8_t*>(in[0].raw_data())[b % in[0].numel()] = uint8_t(b);
        const Tensor want = trace::interpret(*graph, in)[0];
        auto sunk = graph->clone();
        ASSERT_TRUE(passes::sink_dequantize(*sunk));
        passes::dce(*sunk);
        int byte_cats = 0, requantizes = 0;
        for (const auto& n : sunk->nodes()) {
          byte_cats += n->op == OpId::cat && n->inputs[0]->meta.dtype == dtype;
          requantizes += n->op == OpId::quantize_linear || n->op == OpId::dequantize_linear;
        }
        EXPECT_EQ(byte_cats, 1);
        EXPECT_EQ(requantizes, requantize ? 0 : 1);  // requantized: bytes in, bytes out
        expect_same_bytes(want, trace::interpret(*sunk, in)[0], "interpreted");
        runtime::PipelineOptions po;
        po.backend = runtime::KernelBackend::Interpreter;
        runtime::CompiledGraph compiled = runtime::compile_graph(graph->clone(), po);
        expect_same_bytes(want, compiled.plan->run(in)[0], "compiled");
      }
    }
  }
}

// An SPP block: cat(x, max_pool(x)) of one dequantized value. The concatenation can move only
// after the pooling has: the pass repeats until nothing moves, then both run on bytes.
TEST(SinkDequantize, APoolingSunkLetsItsConcatenationSinkToo) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* q = g->add_input({{1, 3, 8, 8}, DType::UInt8});
  ir::Node* dq = g->add_node(OpId::dequantize_linear,
                             {q, g->add_constant(full({}, 0.25f, DType::Float32)), g->add_constant(full({}, 9, DType::UInt8))},
                             {{"axis", int64_t(1)}});
  ir::Node* pool = g->add_node(OpId::max_pool2d, {dq->outputs[0]},
                               {{"kernel", Shape{3, 3}}, {"stride", Shape{1, 1}}, {"padding", Shape{1, 1}}});
  ir::Node* cat = g->add_node(OpId::cat, {dq->outputs[0], pool->outputs[0]}, {{"dim", int64_t(1)}});
  g->add_output(cat->outputs[0]);
  const std::vector<Tensor> in = {random_bytes({1, 3, 8, 8}, DType::UInt8, 77)};
  const Tensor want = trace::interpret(*g, in)[0];
  ASSERT_TRUE(passes::sink_dequantize(*g));
  passes::dce(*g);
  int byte_cats = 0, byte_pools = 0;
  for (const auto& n : g->nodes()) {
    byte_cats += n->op == OpId::cat && n->inputs[0]->meta.dtype == DType::UInt8;
    byte_pools += n->op == OpId::max_pool2d && n->inputs[0]->meta.dtype == DType::UInt8;
  }
  EXPECT_EQ(byte_pools, 1);
  EXPECT_EQ(byte_cats, 1);
  expect_same_bytes(want, trace::interpret(*g, in)[0], "interpreted");
}

TEST(SinkDequantize, LeavesWhatWouldNotBeExact) {
  // inputs dequantized with different scales, or different zero points
  EXPECT_FALSE(passes::sink_dequantize(*cat_graph(DType::UInt8, {0.1f, 0.2f}, {3, 3}, false)));
  EXPECT_FALSE(passes::sink_dequantize(*cat_graph(DType::UInt8, {0.1f, 0.1f}, {3, 4}, false)));
  // (q - z) * s overflows float32 for a scale this large: requantizing saturates, not q
  auto huge = cat_graph(DType::UInt8, {3e38f}, {100}, true);
  passes::sink_dequantize(*huge);
  EXPECT_EQ(huge->outputs()[0]->producer->op, OpId::quantize_linear);
  // the indices are read
  EXPECT_FALSE(passes::sink_dequantize(*pool_graph(DType::UInt8, 0.1f, 0, {{3, 3}, {1, 1}, {1, 1}, {}}, true)));
  // a dilated window (not proven to touch the image: the pass keeps to dilation 1)
  EXPECT_FALSE(passes::sink_dequantize(*pool_graph(DType::Int8, 0.1f, 0, {{3, 3}, {1, 1}, {1, 1}, {2, 2}}, false)));
}

}  // namespace
}  // namespace smelt
