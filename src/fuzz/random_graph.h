// Random well-typed graphs for differential testing: random ops from the op table, random shapes
// with broadcasting, duplicate edges (x * x), views (reshape, permute, slice, expand), constants
// that trigger algebraic rules (0, 1, -1, 2), reductions and selects.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/graph.h"

namespace smelt::fuzz {

struct RandomGraphOptions {
  int max_nodes = 12;
  int max_rank = 3;
  int max_dim = 5;
};

std::unique_ptr<ir::Graph> random_graph(uint64_t seed, const RandomGraphOptions& options = {});

}  // namespace smelt::fuzz
