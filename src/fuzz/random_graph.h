// Random well-typed graphs for differential testing: random ops from the op table, random shapes
// with broadcasting, duplicate edges (x * x), views (reshape, permute, slice with steps, expand),
// constants that trigger algebraic rules (0, 1, -1, 2), reductions (sum, mean, amax, amin, var,
// argmax), selects on comparisons, casts, pow with safe exponents, softmax / log_softmax /
// layer_norm, matmul (vectors, batches that broadcast, a @ a^T, linear -> eval batch norm), cat,
// index_select / gather with valid index constants, and now and then a 4-D image through conv2d
// (+ bias, + eval batch norm, + relu) or pooling. Every node passes its op's shape rule (a
// rejected one is replaced by another); tensors stay small so a case runs in well under a
// millisecond.
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
