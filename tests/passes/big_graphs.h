// Large synthetic graphs for the scaling test (tests/passes/big_graph_test.cpp) and the pipeline
// benchmark (bench/ir_pipeline_bench.cpp): header-only so both can build them.
//   chain: `steps` steps of y = tanh(y * c + c * y) with a fresh copy of c in each step (cse
//          merges the copies and, after canonicalize, the two products) and a dead exp(y * c);
//          5 nodes per step, 3 live after the default pipeline.
//   wide:  `nodes` binary nodes over 16 inputs, each reading two values from the last 1,000;
//          every 4th node repeats an earlier one (cse), every 10th adds two constants (fold),
//          and only the last 64 values are returned, so most of the graph is dead (dce).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "smelt/creation.h"

namespace smelt::big_graphs {

inline constexpr int64_t kWidth = 4;  // every tensor is f32[4]

inline std::unique_ptr<ir::Graph> chain(int64_t steps) {
  using ops::OpId;
  auto g = std::make_unique<ir::Graph>();
  ir::Value* y = g->add_input({{kWidth}, DType::Float32}, "x");
  for (int64_t i = 0; i < steps; ++i) {
    ir::Value* c = g->add_constant(scalar_tensor(1.125 + double(i % 7) * 0.125, DType::Float32));
    ir::Value* a = g->add_node(OpId::mul, {y, c})->outputs[0];
    ir::Value* b = g->add_node(OpId::mul, {c, y})->outputs[0];
    g->add_node(OpId::exp, {a});  // dead
    ir::Value* s = g->add_node(OpId::add, {a, b})->outputs[0];
    y = g->add_node(OpId::tanh, {s})->outputs[0];
  }
  g->add_output(y);
  return g;
}

inline std::unique_ptr<ir::Graph> wide(int64_t nodes, uint64_t seed = 7) {
  using ops::OpId;
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> values;
  for (int i = 0; i < 16; ++i) values.push_back(g->add_input({{kWidth}, DType::Float32}));
  std::vector<ir::Node*> made;
  uint64_t state = seed;
  auto next = [&](uint64_t n) {  // splitmix64: the same graph on every platform
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) % n;
  };
  const OpId kOps[] = {OpId::add, OpId::mul, OpId::maximum, OpId::sub};
  for (int64_t i = 0; i < nodes; ++i) {
    ir::Node* n;
    if (i % 4 == 3 && !made.empty()) {
      ir::Node* old = made[made.size() - 1 - next(std::min<uint64_t>(made.size(), 1000))];
      n = g->add_node(old->op, old->inputs);
    } else if (i % 10 == 9) {
      ir::Value* a = g->add_constant(scalar_tensor(double(next(5)), DType::Float32));
      ir::Value* b = g->add_constant(full({kWidth}, 0.25, DType::Float32));
      n = g->add_node(kOps[next(4)], {a, b});
    } else {
      uint64_t window = std::min<uint64_t>(values.size(), 1000);
      ir::Value* a = values[values.size() - 1 - next(window)];
      ir::Value* b = values[values.size() - 1 - next(window)];
      n = g->add_node(kOps[next(4)], {a, b});
    }
    made.push_back(n);
    values.push_back(n->outputs[0]);
  }
  for (size_t k = values.size() - 64; k < values.size(); ++k) g->add_output(values[k]);
  return g;
}

}  // namespace smelt::big_graphs
