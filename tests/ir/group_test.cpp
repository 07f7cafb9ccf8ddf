// Group nodes: a node holding a subgraph. Printed nested, parsed back, verified, deep-copied,
// drawn as a DOT cluster, run by the interpreter, left alone by fold and told apart by cse.
#include "ir/dot.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fold.h"
#include "support/check.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

const char* kGroupText =
    "graph(%x: f32[2,3], %y: f32[2,3]) {\n"
    "  %c: f32[] = constant 2\n"
    "  %2: f32[2,3], %3: f32[2,3] = group(%x, %y) {kind=\"pointwise\"} graph(%0: f32[2,3], %1: f32[2,3]) {\n"
    "    %k: f32[] = constant 0.5\n"
    "    %2: f32[2,3] = add(%0, %1)\n"
    "    %3: f32[2,3] = mul(%2, %k)\n"
    "    %4: f32[2,3] = relu(%3)\n"
    "    return %4, %2\n"
    "  }\n"
    "  %4: f32[2,3] = mul(%2, %c)\n"
    "  return %4, %3\n"
    "}\n";

// The same computation without a group.
const char* kFlat =
    "graph(%x: f32[2,3], %y: f32[2,3]) {\n"
    "  %c: f32[] = constant 2\n"
    "  %k: f32[] = constant 0.5\n"
    "  %2: f32[2,3] = add(%x, %y)\n"
    "  %3: f32[2,3] = mul(%2, %k)\n"
    "  %4: f32[2,3] = relu(%3)\n"
    "  %5: f32[2,3] = mul(%4, %c)\n"
    "  return %5, %2\n"
    "}\n";

TEST(Group, PrintParseRoundTripAndVerify) {
  auto g = ir::parse(kGroupText);
  ASSERT_NO_THROW(ir::verify(*g));
  EXPECT_EQ(ir::print(*g), kGroupText);
  const ir::Node* group = g->nodes().front().get();
  ASSERT_TRUE(group->is_group());
  EXPECT_EQ(group->body->num_nodes(), 3u);
  EXPECT_EQ(group->outputs.size(), 2u);
}

TEST(Group, CloneCopiesTheBody) {
  auto g = ir::parse(kGroupText);
  auto copy = g->clone();
  EXPECT_EQ(ir::print(*copy), kGroupText);
  ir::verify(*copy);
  const ir::Node* a = g->nodes().front().get();
  const ir::Node* b = copy->nodes().front().get();
  EXPECT_NE(a->body.get(), b->body.get());
  EXPECT_NE(a->body->inputs()[0], b->body->inputs()[0]);
}

TEST(Group, BuiltWithTheApi) {
  auto body = std::make_unique<ir::Graph>();
  ir::Value* a = body->add_input({{4}, DType::Float64});
  body->add_output(body->add_node(ops::OpId::exp, {a})->outputs[0]);
  ir::Graph g;
  ir::Value* x = g.add_input({{4}, DType::Float64}, "x");
  ir::Node* n = g.add_group({x}, std::move(body));
  g.add_output(n->outputs[0]);
  ir::verify(g);
  EXPECT_EQ(n->outputs[0]->meta, (ops::TensorMeta{{4}, DType::Float64}));
  // Input metas must match the body's.
  auto bad = std::make_unique<ir::Graph>();
  bad->add_output(bad->add_input({{4}, DType::Float32}));
  EXPECT_THROW(g.add_group({x}, std::move(bad)), Error);
  // The op table's shape rule refuses a group without its body.
  EXPECT_THROW(g.add_node(ops::OpId::group, {x}), Error);
}

TEST(Group, InterpreterRunsTheBody) {
  auto g = ir::parse(kGroupText);
  auto flat = ir::parse(kFlat);
  Tensor x = testing::random_tensor({2, 3}, -1, 1, 3).to(DType::Float32);
  Tensor y = testing::random_tensor({2, 3}, -1, 1, 4).to(DType::Float32);
  auto got = trace::interpret(*g, {x, y});
  auto want = trace::interpret(*flat, {x, y});
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(got[i].to_vector(), want[i].to_vector()) << i;
}

TEST(Group, VerifierChecksTheBody) {
  auto g = ir::parse(kGroupText);
  ir::Node* group = g->nodes().front().get();
  group->body->inputs()[0]->meta.shape = {3, 2};
  EXPECT_THROW(ir::verify(*g), Error);

  // Parse errors: a declared type that the body does not give; a body with the wrong inputs.
  std::string text = kGroupText;
  std::string wrong_out = text;
  wrong_out.replace(wrong_out.find("%3: f32[2,3] = group"), 12, "%3: f64[2,3]");
  EXPECT_THROW(ir::parse(wrong_out), Error);
  std::string wrong_in = text;
  wrong_in.replace(wrong_in.find("%1: f32[2,3]) {"), 12, "%1: f32[3,2]");
  EXPECT_THROW(ir::parse(wrong_in), Error);
}

TEST(Group, NestingIsBounded) {
  std::string text = "graph(%x: f32[2]) {\n";
  std::string close;
  for (int i = 0; i < 100; ++i) {
    text += "%1: f32[2] = group(%x) graph(%x: f32[2]) {\n";
    close += "return %1\n}\n";
  }
  text += "return %x\n}\n" + close + "return %1\n}\n";
  try {
    ir::parse(text);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nest deeper"), std::string::npos) << e.what();
  }
}

TEST(Group, DotDrawsACluster) {
  auto g = ir::parse(kGroupText);
  std::string dot = ir::to_dot(*g, "g");
  EXPECT_NE(dot.find("subgraph \"cluster_n0\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0_v0"), std::string::npos) << dot;
}

TEST(Group, FoldSkipsAndCseComparesBodies) {
  // Two groups over the same operand: equal bodies merge, a different body does not.
  const char* text =
      "graph(%x: f32[2]) {\n"
      "  %1: f32[2] = group(%x) graph(%a: f32[2]) {\n    %1: f32[2] = exp(%a)\n    return %1\n  }\n"
      "  %2: f32[2] = group(%x) graph(%a: f32[2]) {\n    %1: f32[2] = exp(%a)\n    return %1\n  }\n"
      "  %3: f32[2] = group(%x) graph(%a: f32[2]) {\n    %1: f32[2] = log(%a)\n    return %1\n  }\n"
      "  return %1, %2, %3\n"
      "}\n";
  auto g = ir::parse(text);
  EXPECT_TRUE(passes::cse(*g));
  passes::dce(*g);
  ir::verify(*g);
  EXPECT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(g->outputs()[0], g->outputs()[1]);
  EXPECT_NE(g->outputs()[0], g->outputs()[2]);

  // A group of constants stays a group: fold does not run kernels for it.
  auto c = ir::parse(
      "graph() {\n  %c: f32[2] = constant [1, 2]\n"
      "  %1: f32[2] = group(%c) graph(%a: f32[2]) {\n    %1: f32[2] = exp(%a)\n    return %1\n  }\n"
      "  return %1\n}\n");
  EXPECT_FALSE(passes::fold(*c));
  ir::verify(*c);
}

}  // namespace
}  // namespace smelt
