// smelt::Graph, the installed face of trace, IR text, passes and the interpreter. The same program
// runs against an installed copy in tests/consumer; here it runs in-tree (and under ASan).
#include <algorithm>

#include "support/check.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::identical;

std::vector<Tensor> twice_relu(const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
  Tensor z = matmul(in[0], p[0]);
  return {(relu(z) + relu(z)) * 1.0};
}

TEST(PublicGraph, TraceOptimizeRunMatchesEager) {
  Tensor x = testing::random_tensor({3, 4}, -1, 1, 1), w = testing::random_tensor({4, 2}, -1, 1, 2);
  Graph g = Graph::trace(twice_relu, {x}, {w});
  EXPECT_EQ(g.num_inputs(), 2u);
  EXPECT_EQ(g.num_outputs(), 1u);
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"matmul", "relu", "relu", "add", "mul"}));
  Tensor eager = twice_relu({x}, {w})[0];

  OptimizeReport report = g.optimize();
  EXPECT_TRUE(report.converged);
  EXPECT_EQ(report.nodes_before, 5u);
  EXPECT_EQ(report.nodes_after, g.num_nodes());
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"matmul", "relu", "add"}));
  EXPECT_NE(report.table.find("cse"), std::string::npos) << report.table;
  std::vector<Tensor> got = g.run({x, w});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(identical(got[0], eager));

  Graph parsed = Graph::parse(g.print());
  EXPECT_EQ(parsed.print(), g.print());
  EXPECT_TRUE(identical(parsed.run({x, w})[0], eager));
}

TEST(PublicGraph, JointGraphGivesEagerGradients) {
  auto loss_fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    return std::vector<Tensor>{mean(twice_relu(in, p)[0])};
  };
  Tensor x = testing::random_tensor({3, 4}, -1, 1, 3), w = testing::random_tensor({4, 2}, -1, 1, 4);
  Graph joint = Graph::trace_joint(loss_fn, {x}, {w});
  joint.optimize();
  std::vector<Tensor> got = joint.run({x, w, ones({}, DType::Float64)});
  Tensor leaf = w.clone().set_requires_grad();
  Tensor loss = loss_fn({x}, {leaf})[0];
  loss.backward();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(identical(got[0], loss));
  EXPECT_TRUE(identical(got[1], leaf.grad()));
}

TEST(PublicGraph, CloneIsIndependent) {
  Tensor x = testing::random_tensor({2, 4}), w = testing::random_tensor({4, 2});
  Graph g = Graph::trace(twice_relu, {x}, {w});
  Graph copy = g.clone();
  g.optimize();
  EXPECT_EQ(copy.num_nodes(), 5u);
  EXPECT_LT(g.num_nodes(), copy.num_nodes());
  copy.verify();
}

TEST(PublicGraph, PassNamesCoverTheDefaultPipeline) {
  std::vector<std::string> names = Graph::pass_names();
  std::string pipeline = Graph::default_pipeline() + ",";
  for (size_t start = 0, comma; (comma = pipeline.find(',', start)) != std::string::npos; start = comma + 1) {
    std::string pass = pipeline.substr(start, comma - start);
    EXPECT_NE(std::find(names.begin(), names.end(), pass), names.end()) << pass;
  }
}

TEST(PublicGraph, MisuseIsAClearError) {
  Tensor x = testing::random_tensor({2, 4}), w = testing::random_tensor({4, 2});
  Graph g = Graph::trace(twice_relu, {x}, {w});
  EXPECT_THROW(g.optimize("dce,nope"), Error);
  EXPECT_THROW(g.run({x}), Error);
  EXPECT_THROW(Graph::parse("graph(%x: f32[2]) {\n  return %y\n}\n"), Error);
  EXPECT_THROW(Graph::trace(Graph::Fn(), {x}), Error);
  Graph moved = std::move(g);
  EXPECT_EQ(moved.num_inputs(), 2u);
  try {
    (void)g.print();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("internal"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace smelt
