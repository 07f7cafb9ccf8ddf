// runtime::schedule_placement: registered ops that start background work (Placement::Early) run
// right after their inputs exist, those that wait for it (Late) right before their first reader;
// the order stays topological and the results do not change.
#include "ir/graph.h"
#include "runtime/schedule_placement.h"
#include "smelt/compile.h"
#include "smelt/custom_op.h"
#include "support/check.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

// An identity op with the given placement.
CustomOp placed_identity(const std::string& name, OpDefinition::Placement placement) {
  OpDefinition def;
  def.name = name;
  def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
    Tensor o = out[0];
    o.copy_(in[0]);
  };
  def.placement = placement;
  return register_op(def);
}

const CustomOp& early() {
  static const CustomOp op = placed_identity("placement_test_start", OpDefinition::Placement::Early);
  return op;
}
const CustomOp& late() {
  static const CustomOp op = placed_identity("placement_test_wait", OpDefinition::Placement::Late);
  return op;
}

std::vector<Tensor> fn(const std::vector<Tensor>& in) {
  Tensor y = exp(in[0]);
  Tensor z = sin(tanh(in[0]));
  Tensor started = early()({y})[0];  // written last: the scheduler moves it up after exp
  Tensor waited = late()({started})[0];
  Tensor u = cos(z) * 2.0;  // the wait moves down past these, to right before the add
  Tensor v = u + 1.0;
  return {waited + v};
}

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(ops::op_info(n->op).name);
  return names;
}

size_t position(const std::vector<std::string>& names, const std::string& name) {
  return size_t(std::find(names.begin(), names.end(), name) - names.begin());
}

TEST(SchedulePlacement, EarlyMovesUpLateMovesDownResultsStay) {
  const Tensor x = testing::random_tensor({5}, -1, 1, 3);
  auto graph = trace::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); }, {x});
  const Tensor before = trace::interpret(*graph, {x})[0];
  EXPECT_EQ(runtime::schedule_placement(*graph), 2);
  const std::vector<std::string> names = op_names(*graph);
  EXPECT_EQ(position(names, "placement_test_start"), position(names, "exp") + 1);
  EXPECT_EQ(position(names, "placement_test_wait"), names.size() - 2) << "right before the final add";
  EXPECT_LT(position(names, "placement_test_start"), position(names, "tanh"));
  EXPECT_GT(position(names, "placement_test_wait"), position(names, "cos"));
  EXPECT_TRUE(testing::all_close(trace::interpret(*graph, {x})[0], before, 0, 0));
  EXPECT_EQ(runtime::schedule_placement(*graph), 0) << "a second run moves nothing";
}

// Compiled, the same order reaches the plan, and the values are eager's.
TEST(SchedulePlacement, ThePlanRunsTheOpsWhereTheyWerePlaced) {
  const Tensor x = testing::random_tensor({5}, -1, 1, 4);
  CompileOptions options;
  options.backend = "interpreter";
  options.fuse = false;
  CompiledFunction f = compile(fn, options);
  EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-7));
  const std::string plan = f.report().plan;
  const size_t start = plan.find("placement_test_start"), wait = plan.find("placement_test_wait");
  ASSERT_NE(start, std::string::npos) << plan;
  ASSERT_NE(wait, std::string::npos) << plan;
  EXPECT_NE(plan.substr(start, wait - start).find("tanh"), std::string::npos) << plan;
}

}  // namespace
}  // namespace smelt
