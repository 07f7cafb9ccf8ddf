// Unit tests of fold's options and safety checks, and of bisect (with deliberately broken passes,
// which the registry must never hold).
#include <cstdlib>
#include <set>

#include "ir/printer.h"
#include "passes/bisect.h"
#include "passes/fold.h"
#include "passes/simplify.h"
#include "support/check.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

TEST(Fold, IntegerDivisionByZeroStaysComputed) {
  auto g = ir::parse(
      "graph(%x: i64[2]) {\n"
      "  %a: i64[2] = constant [4, 6]\n"
      "  %b: i64[2] = constant [2, 0]\n"
      "  %1: i64[2] = div(%a, %b)\n"
      "  %2: i64[2] = add(%x, %1)\n"
      "  return %2\n"
      "}\n");
  EXPECT_FALSE(passes::fold(*g));
  EXPECT_EQ(g->num_nodes(), 2u);
}

TEST(Fold, SizeLimitIsPerOutput) {
  const char* text =
      "graph(%x: f32[3]) {\n"
      "  %c: f32[] = constant 2\n"
      "  %1: f32[3] = expand(%c) {shape=[3]}\n"
      "  %2: f32[3] = mul(%x, %1)\n"
      "  return %2\n"
      "}\n";
  auto small = ir::parse(text);
  EXPECT_FALSE(passes::fold(*small, {.max_elements = 2}));
  auto enough = ir::parse(text);
  EXPECT_TRUE(passes::fold(*enough, {.max_elements = 3}));
  // The folded expand is a dense constant, not a stride-0 view of the scalar.
  ir::Value* folded = enough->nodes().back()->inputs[1];
  ASSERT_EQ(folded->kind, ir::ValueKind::Constant);
  EXPECT_TRUE(folded->constant.is_contiguous());
  EXPECT_EQ(folded->constant.to_vector(), (std::vector<double>{2, 2, 2}));
}

TEST(Fold, MaxElementsFromEnvironment) {
  ::setenv("SMELT_FOLD_MAX_ELEMENTS", "17", 1);
  EXPECT_EQ(passes::fold_options_from_env().max_elements, 17);
  ::setenv("SMELT_FOLD_MAX_ELEMENTS", "many", 1);
  try {
    passes::fold_options_from_env();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SMELT_FOLD_MAX_ELEMENTS"), std::string::npos) << e.what();
  }
  ::unsetenv("SMELT_FOLD_MAX_ELEMENTS");
  EXPECT_EQ(passes::fold_options_from_env().max_elements, passes::FoldOptions{}.max_elements);
}

TEST(Simplify, EveryRuleHasAUniqueName) {
  std::set<std::string> names;
  for (const ir::RewriteRule& r : passes::simplify_rules()) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
  }
  EXPECT_GE(names.size(), 17u);
}

const char* kBisectGraph =
    "graph(%x: f32[2,3]) {\n"
    "  %o: f32[] = constant 1\n"
    "  %1: f32[2,3] = mul(%x, %o)\n"
    "  %2: f32[2,3] = neg(%1)\n"
    "  %3: f32[2,3] = exp(%2)\n"
    "  return %3\n"
    "}\n";

// Wrong on purpose: drops every neg.
bool drop_negs(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op != ops::OpId::neg || n->outputs[0]->uses.empty()) continue;
    g.replace_all_uses(n->outputs[0], n->inputs[0]);
    changed = true;
  }
  return changed;
}

bool throw_always(ir::Graph&) {
  SMELT_CHECK(false) << "this pass always fails";
  return false;
}

TEST(Bisect, CorrectPipelineChangesNothing) {
  auto g = ir::parse(kBisectGraph);
  auto r = passes::bisect(*g, passes::parse_pipeline(passes::kDefaultPipeline));
  EXPECT_FALSE(r.found) << r.pass << ": " << r.reason;
  EXPECT_GT(r.applications, 0);
  EXPECT_EQ(ir::print(*g), ir::print(*ir::parse(kBisectGraph)));  // the input is untouched
}

TEST(Bisect, FindsTheBrokenPassApplication) {
  auto g = ir::parse(kBisectGraph);
  const passes::PassInfo broken{"drop_negs", "wrong on purpose", drop_negs};
  std::vector<const passes::PassInfo*> pipeline = {passes::find_pass("simplify"), passes::find_pass("dce"), &broken};
  auto r = passes::bisect(*g, pipeline);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.pass, "drop_negs");
  EXPECT_EQ(r.iteration, 1);
  EXPECT_EQ(r.application, 3);
  EXPECT_NE(r.reason.find("output 0 differs"), std::string::npos) << r.reason;
  EXPECT_NE(r.ir_before.find("neg("), std::string::npos) << r.ir_before;
  EXPECT_EQ(r.ir_before.find("mul("), std::string::npos) << "simplify ran first: " << r.ir_before;
  EXPECT_NE(r.ir_after, r.ir_before);
}

TEST(Bisect, ReportsAPassThatThrows) {
  auto g = ir::parse(kBisectGraph);
  const passes::PassInfo broken{"throw_always", "fails on purpose", throw_always};
  auto r = passes::bisect(*g, {&broken});
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.pass, "throw_always");
  EXPECT_NE(r.reason.find("this pass always fails"), std::string::npos) << r.reason;
  EXPECT_TRUE(r.ir_after.empty());
}

// A traced joint forward+backward graph through the default pipeline: converges, shrinks, and
// computes the same loss and gradients.
TEST(DefaultPipeline, JointGraphKeepsItsResults) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    Tensor h = tanh(in[0] * p[0] + p[1]) * 1.0 + 0.0;
    return std::vector<Tensor>{mean(h * h / 2.0)};
  };
  Tensor x = randn({5, 3}, DType::Float64);
  Tensor w = randn({3}, DType::Float64), b = randn({1}, DType::Float64);
  auto g = trace::trace_joint(fn, {x}, {w, b});
  auto original = g->clone();
  auto result = passes::run_pipeline(*g, passes::kDefaultPipeline, {});
  EXPECT_TRUE(result.converged) << result.report();
  EXPECT_LT(g->num_nodes(), original->num_nodes()) << ir::print(*g);
  std::vector<Tensor> inputs = {x, w, b, ones({}, DType::Float64)};
  auto want = trace::interpret(*original, inputs);
  auto got = trace::interpret(*g, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-12, 1e-14)) << i;
  EXPECT_FALSE(passes::bisect(*original, passes::parse_pipeline(passes::kDefaultPipeline)).found);
}

}  // namespace
}  // namespace smelt
