// Outputs that update inputs (ir::Graph::set_output_updates; runtime/plan_updates.cpp): the plan
// writes such an output into the caller's input, in place when the step computing it is the last
// reader of the input and stores each element over the one it read, by a copy at the end of the
// run otherwise. Each case checks the values against the graph interpreted node by node, which
// input memory was written, and what the plan says it did.
#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "runtime/pipeline.h"
#include "runtime/schedule_updates.h"
#include "smelt/ops.h"
#include "support/check.h"
#include "support/errors.h"
#include "support/helpers.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

using testing::rand32;

using testing::all_close;

runtime::CompiledGraph compile(const ir::Graph& g, runtime::KernelBackend backend) {
  runtime::PipelineOptions o;
  o.backend = backend;
  return runtime::compile_graph(g.clone(), o);
}

// p (64), g (64): p' = p - 0.1 g updates p; another output reads p in `other` ways.
struct Sgd {
  ir::Graph graph;
  ir::Value *p, *g, *updated;
  Sgd() {
    p = graph.add_input({{64}, DType::Float32}, "p", ir::ValueKind::Param);
    g = graph.add_input({{64}, DType::Float32}, "g");
    ir::Value* step = graph.add_node(ops::OpId::mul, {g, graph.add_constant(scalar_tensor(0.1, DType::Float32))})->outputs[0];
    updated = graph.add_node(ops::OpId::sub, {p, step})->outputs[0];
  }
};

// The plan's values equal the interpreter's; the caller's p holds p' and is the output returned.
void expect_updates(const ir::Graph& graph, int in_place, const std::string& what) {
  for (auto backend : {runtime::KernelBackend::Interpreter, runtime::KernelBackend::Compiled}) {
    const Tensor p = rand32({64}, 1), g = rand32({64}, 2);
    const std::vector<Tensor> want = trace::interpret(graph, {p.clone(), g.clone()});
    runtime::CompiledGraph c = compile(graph, backend);
    Tensor caller_p = p.clone();
    const void* memory = caller_p.raw_data();
    const uint64_t version = caller_p.storage()->version();
    const std::vector<Tensor> got = c.plan->run({caller_p, g});
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(all_close(got[k], want[k], 1e-6, 1e-7)) << what << " output " << k;
    for (const auto& [o, i] : graph.updates()) {
      EXPECT_EQ(got[o].raw_data(), memory) << what << ": the output is the caller's input";
      EXPECT_TRUE(all_close(caller_p, want[o], 1e-6, 1e-7)) << what;
    }
    EXPECT_GT(caller_p.storage()->version(), version) << what << ": written behind autograd's back";
    EXPECT_EQ(c.plan->stats().updates_in_place, in_place) << what << "\n" << c.plan->describe();
  }
}

TEST(PlanUpdates, APointwiseUpdateIsWrittenInPlace) {
  Sgd s;
  s.graph.add_output(s.updated);
  s.graph.set_output_updates(0, 0);
  expect_updates(s.graph, 1, "p - 0.1 g");
  EXPECT_NE(ir::print(s.graph).find("# output 0 updates %p"), std::string::npos) << ir::print(s.graph);
}

// Another output reads p after a reduction: the writer is scheduled after it, still in place.
TEST(PlanUpdates, TheWriterMovesAfterTheOtherReaders) {
  Sgd s;
  ir::Value* total = s.graph.add_node(ops::OpId::sum, {s.p}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t(1)}})->outputs[0];
  ir::Value* scaled = s.graph.add_node(ops::OpId::mul, {s.g, total})->outputs[0];
  s.graph.add_output(s.updated);
  s.graph.add_output(scaled);
  s.graph.set_output_updates(0, 0);
  expect_updates(s.graph, 1, "p' and g * sum(p)");
}

// An output that reads both the new value and the old one: no order lets the update be in
// place, so the plan copies it at the end of the run.
TEST(PlanUpdates, ReadingOldAndNewValuesFallsBackToACopy) {
  Sgd s;
  ir::Value* total = s.graph.add_node(ops::OpId::sum, {s.updated}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t(1)}})->outputs[0];
  ir::Value* mixed = s.graph.add_node(ops::OpId::mul, {s.p, total})->outputs[0];
  s.graph.add_output(s.updated);
  s.graph.add_output(mixed);
  s.graph.set_output_updates(0, 0);
  expect_updates(s.graph, 0, "p' and p * sum(p')");
  runtime::CompiledGraph c = compile(s.graph, runtime::KernelBackend::Interpreter);
  EXPECT_NE(c.plan->describe().find("output 0 copied"), std::string::npos) << c.plan->describe();
}

// The input returned as an output too: its copy reads the old value at the end.
TEST(PlanUpdates, TheOldValueReturnedToo) {
  Sgd s;
  s.graph.add_output(s.updated);
  s.graph.add_output(s.p);
  s.graph.set_output_updates(0, 0);
  expect_updates(s.graph, 0, "p' and p");
}

// The same tensor as p and g, and a strided p: the caller's tensor holds the update all the same.
TEST(PlanUpdates, SharedAndStridedInputs) {
  Sgd s;
  ir::Value* other = s.graph.add_node(ops::OpId::mul, {s.g, s.g})->outputs[0];
  s.graph.add_output(other);
  s.graph.add_output(s.updated);
  s.graph.set_output_updates(1, 0);
  runtime::CompiledGraph c = compile(s.graph, runtime::KernelBackend::Interpreter);
  Tensor both = rand32({64}, 3);
  const Tensor old = both.clone();
  std::vector<Tensor> got = c.plan->run({both, both});
  EXPECT_TRUE(all_close(got[0], old * old, 1e-6, 1e-7)) << "g read its old values to the end";
  EXPECT_TRUE(all_close(both, old - old * 0.1f, 1e-6, 1e-7));
  Tensor wide = rand32({64, 2}, 4);
  Tensor strided = wide.slice(1, 0, 1).reshape({64});  // every other element
  ASSERT_FALSE(strided.is_contiguous());
  const Tensor before = strided.clone(), g = rand32({64}, 5);
  got = c.plan->run({strided, g});
  EXPECT_TRUE(all_close(strided, before - g * 0.1f, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(wide.slice(1, 0, 1).reshape({64}), before - g * 0.1f, 1e-6, 1e-7));
}

TEST(PlanUpdates, TheGraphChecksItsUpdates) {
  Sgd s;
  s.graph.add_output(s.updated);
  testing::expect_error([&] { s.graph.set_output_updates(1, 0); }, {"output 1 updates input 0", "1 outputs"});
  s.graph.set_output_updates(0, 0);
  testing::expect_error([&] { s.graph.set_output_updates(0, 1); }, {"already updates"});
  EXPECT_EQ(s.graph.clone()->updates(), s.graph.updates());
}

}  // namespace
}  // namespace smelt
