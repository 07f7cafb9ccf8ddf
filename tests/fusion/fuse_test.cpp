// fuse(): metrics computed from the graph, the contract checker catching each kind of violation,
// fusing a fused graph again, and a large graph.
#include <gtest/gtest.h>

#include "fusion/fuse.h"
#include "fusion/pattern.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/bisect.h"
#include "runtime/pipeline.h"
#include "support/check.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

int count_groups(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->body != nullptr;
  return n;
}

TEST(Fuse, MetricsOfAPointwiseChain) {
  // three elementwise ops over f32[4,8] (128 bytes each): two intermediates never stored
  auto g = ir::parse(R"(graph(%x: f32[4,8]) {
  %1: f32[4,8] = exp(%x)
  %2: f32[4,8] = neg(%1)
  %3: f32[4,8] = tanh(%2)
  %4: f32[4,8] = softmax(%3) {dim=0}
  return %4
})");
  fusion::FusionReport r = fusion::fuse(*g);
  EXPECT_EQ(r.kernels_before, 4);
  EXPECT_EQ(r.kernels_after, 2);
  EXPECT_EQ(r.fusable_ops, 3);  // softmax over dim 0 fits no pattern
  EXPECT_EQ(r.fused_ops, 3);
  EXPECT_DOUBLE_EQ(r.fusion_rate(), 1.0);
  EXPECT_EQ(r.bytes_not_written, 2 * 4 * 8 * 4);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].pattern, fusion::Pattern::Pointwise);
  ASSERT_EQ(r.unfused.size(), 1u);
  EXPECT_EQ(r.unfused[0].node, "%4 = softmax");
  EXPECT_NE(r.explain().find("kernels 4 -> 2"), std::string::npos) << r.explain();
}

TEST(Fuse, FusingAgainChangesNothing) {
  auto g = ir::parse(R"(graph(%x: f32[4,8], %w: f32[8,8], %b: f32[8]) {
  %1: f32[4,8] = matmul(%x, %w)
  %2: f32[4,8] = add(%1, %b)
  %3: f32[4,8] = gelu(%2) {approximate=0}
  %4: f32[4,8] = log_softmax(%3) {dim=1}
  %5: f32[4] = sum(%4) {dims=[1]}
  return %5
})");
  fusion::fuse(*g);
  const std::string once = ir::print(*g);
  fusion::FusionReport again = fusion::fuse(*g);
  EXPECT_TRUE(again.groups.empty());
  EXPECT_EQ(ir::print(*g), once);
  // the group node stays as it is, explained; log_softmax and sum fit no pattern together
  bool group_explained = false;
  for (const fusion::UnfusedNode& u : again.unfused) group_explained |= u.reason.find("already fused") != std::string::npos;
  EXPECT_TRUE(group_explained) << again.explain();
}

// The contract checker must reject each kind of violation (so the internal check after fuse()
// and the tests that call check_group can fail).
std::string check(const std::string& pattern, const std::string& body, const std::string& out = "f32[4,8]") {
  auto g = ir::parse("graph(%a: f32[4,8], %b: f32[4,8], %w: f32[8,8]) {\n  %9: " + out + " = group(%a, %b, %w) {fusion=\"" +
                     pattern + "\"} " + body + "\n  return %9\n}\n");
  return fusion::check_group(*g->nodes().front());
}

TEST(Fuse, ContractCheckerRejectsViolations) {
  const std::string head = "graph(%0: f32[4,8], %1: f32[4,8], %2: f32[8,8]) {\n";
  // a valid pointwise body passes
  EXPECT_EQ(check("pointwise", head + "%3: f32[4,8] = add(%0, %1)\n %4: f32[4,8] = exp(%3)\n return %4\n}"), "");
  // a general reshape of a computed value is not affine
  EXPECT_NE(check("pointwise", head + "%3: f32[4,8] = exp(%0)\n %4: f32[8,4] = reshape(%3) {shape=[8,4]}\n"
                                      " %5: f32[4,8] = reshape(%4) {shape=[4,8]}\n return %5\n}"), "");
  // a matmul is not pointwise
  EXPECT_NE(check("pointwise", head + "%3: f32[4,8] = matmul(%0, %2)\n %4: f32[4,8] = exp(%3)\n return %4\n}"), "");
  // contraction: a prologue is refused, the product must come first
  EXPECT_NE(check("contraction", head + "%3: f32[4,8] = exp(%0)\n %4: f32[4,8] = matmul(%3, %2)\n return %4\n}"), "");
  EXPECT_EQ(check("contraction", head + "%3: f32[4,8] = matmul(%0, %2)\n %4: f32[4,8] = add(%3, %1)\n return %4\n}"), "");
  // elementwise work on the epilogue's other operand is taken (Adam's beta1 * m), not a view or
  // reduction there, nor anything on the product's operands
  EXPECT_EQ(check("contraction", head + "%3: f32[4,8] = matmul(%0, %2)\n %5: f32[4,8] = mul(%1, %1)\n"
                                        " %4: f32[4,8] = add(%3, %5)\n return %4\n}"), "");
  EXPECT_NE(check("contraction", head + "%3: f32[4,8] = matmul(%0, %2)\n %5: f32[4,1] = sum(%1) {dims=[1], keepdim=1}\n"
                                        " %4: f32[4,8] = add(%3, %5)\n return %4\n}"), "");
  // reduction: an epilogue of another shape; a prologue value returned
  auto red = [&](const std::string& tail, const std::string& out) {
    return check("reduction", head + "%3: f32[4,8] = exp(%0)\n %4: f32[4,1] = sum(%3) {dims=[1], keepdim=1}\n" + tail, out);
  };
  EXPECT_EQ(red(" %5: f32[4,1] = neg(%4)\n return %5\n}", "f32[4,1]"), "");
  // with keepdim, an epilogue of the rows' shape is a broadcast epilogue (a row group), and it may
  // read a prologue value (evaluated again in the second pass); without keepdim neither
  EXPECT_EQ(red(" %5: f32[4,8] = add(%4, %1)\n return %5\n}", "f32[4,8]"), "");
  EXPECT_EQ(red(" %5: f32[4,8] = add(%4, %3)\n return %5\n}", "f32[4,8]"), "");
  auto red_nokeep = [&](const std::string& tail, const std::string& out) {
    return check("reduction", head + "%3: f32[4,8] = exp(%0)\n %4: f32[8] = sum(%3) {dims=[0]}\n" + tail, out);
  };
  EXPECT_NE(red_nokeep(" %5: f32[4,8] = add(%4, %1)\n return %5\n}", "f32[4,8]"), "");
  EXPECT_NE(red_nokeep(" %5: f32[4,8] = add(%4, %3)\n return %5\n}", "f32[4,8]"), "");
  // a prologue value returned
  EXPECT_NE(red(" return %3\n}", "f32[4,8]"), "");
  // two reductions over different dims
  EXPECT_NE(check("reduction", head + "%3: f32[4,1] = sum(%0) {dims=[1], keepdim=1}\n %4: f32[1,8] = sum(%1) {dims=[0], keepdim=1}\n"
                                        " %5: f32[4,8] = add(%3, %4)\n return %5\n}"), "");
  // row: softmax over the first dim is not a row node
  EXPECT_NE(check("row", head + "%3: f32[4,8] = softmax(%0) {dim=0}\n return %3\n}"), "");
  // a dead node in a body
  EXPECT_NE(check("pointwise", head + "%3: f32[4,8] = exp(%0)\n %4: f32[4,8] = neg(%1)\n return %4\n}"), "");
}

// A 30,000-node graph of elementwise chains broken by softmaxes over dim 0: fuse stays fast
// enough for the test to finish (no timing is asserted) and the result verifies and computes
// what the input computed.
TEST(Fuse, LargeGraph) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* v = g->add_input({{2, 3}, DType::Float32}, "x");
  ir::Value* x = v;
  for (int i = 0; i < 30000; ++i) {
    if (i % 7 == 6) v = g->add_node(ops::OpId::softmax, {v}, {{"dim", int64_t(0)}})->outputs[0];
    else if (i % 3 == 0) v = g->add_node(ops::OpId::add, {v, x})->outputs[0];
    else v = g->add_node(ops::OpId::tanh, {v})->outputs[0];
  }
  g->add_output(v);
  auto reference = g->clone();
  fusion::FusionReport r = fusion::fuse(*g);
  ir::verify(*g);
  EXPECT_GT(count_groups(*g), 3000);
  EXPECT_LT(r.kernels_after, r.kernels_before / 2);
  Tensor in = uniform({2, 3}, -1.0, 1.0);
  auto want = trace::interpret(*reference, {in});
  auto got = trace::interpret(*g, {in});
  EXPECT_EQ(want[0].to_vector(), got[0].to_vector());
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Legality is the lowering's (FusionOptions::lowers), contraction groups included: a contraction
// group is asked with its product first (codegen/lower_contraction.h splits the epilogue off it),
// and one whose epilogue the lowering refuses is not made.
TEST(Fuse, AContractionGroupIsAskedAndNotMadeWhenRefused) {
  constexpr const char* kLinearRelu = R"(graph(%x: f32[4,8], %w: f32[8,6], %b: f32[6]) {
  %1: f32[4,6] = matmul(%x, %w)
  %2: f32[4,6] = add(%1, %b)
  %3: f32[4,6] = relu(%2)
  return %3
})";
  auto g = ir::parse(kLinearRelu);
  fusion::FusionOptions options;
  std::vector<fusion::Pattern> asked;
  options.lowers = [&](const ir::Graph& body, fusion::Pattern pattern) -> std::string {
    asked.push_back(pattern);
    if (pattern != fusion::Pattern::Contraction) return "";
    EXPECT_EQ(body.nodes().front()->op, ops::OpId::matmul) << ir::print(body);
    return "refused by the test";
  };
  fusion::FusionReport r = fusion::fuse(*g, options);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], fusion::Pattern::Contraction);
  for (const auto& n : g->nodes()) {
    EXPECT_NE(fusion::group_pattern(*n), fusion::Pattern::Contraction) << ir::print(*g);
  }
  EXPECT_NE(r.explain().find("would not lower to one kernel (refused by the test)"), std::string::npos) << r.explain();
  // accepted, the same graph makes the contraction group
  options.lowers = [](const ir::Graph&, fusion::Pattern) { return std::string(); };
  auto again = ir::parse(kLinearRelu);
  fusion::fuse(*again, options);
  bool contraction = false;
  for (const auto& n : again->nodes()) contraction |= fusion::group_pattern(*n) == fusion::Pattern::Contraction;
  EXPECT_TRUE(contraction) << ir::print(*again);
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// The epilogue of a GEMM takes the elementwise producers of its other operands that only it reads
// (beta1 * m next to a weight gradient), and the compiled graph computes what the graph does.
TEST(Fuse, AContractionEpilogueTakesWorkOnItsOtherOperands) {
  auto g = ir::parse(
      "graph(%x: f32[16,8], %w: f32[8,12], %m: f32[16,12]) {\n"
      "  %c: f32[] = constant 0.9\n"
      "  %1: f32[16,12] = matmul(%x, %w)\n"
      "  %2: f32[16,12] = mul(%m, %c)\n"
      "  %3: f32[16,12] = add(%1, %2)\n"
      "  return %3\n}\n");
  const std::vector<Tensor> inputs = passes::random_inputs(*g, 3);
  const std::vector<Tensor> want = trace::interpret(*g, inputs);
  for (auto backend : {runtime::KernelBackend::Interpreter, runtime::KernelBackend::Compiled}) {
    runtime::PipelineOptions o;
    o.backend = backend;
    runtime::CompiledGraph c = runtime::compile_graph(g->clone(), o);
    ASSERT_EQ(c.graph->num_nodes(), 1u) << ir::print(*c.graph);
    EXPECT_EQ(fusion::group_pattern(*c.graph->nodes().front()), fusion::Pattern::Contraction);
    EXPECT_TRUE(testing::all_close(c.plan->run(inputs)[0], want[0], 1e-5, 1e-6));
  }
}

}  // namespace
}  // namespace smelt
