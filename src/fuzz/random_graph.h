// Random well-typed graphs for differential testing: random ops from the op table, random shapes
// with broadcasting, duplicate edges (x * x), views (reshape, permute, slice with steps, expand),
// constants that trigger algebraic rules (0, 1, -1, 2), reductions (sum, mean, amax, amin, var,
// argmax), selects on comparisons, casts (float64 <-> float32, to int64 and bool), pow, softmax
// / log_softmax / layer_norm, matmul (vectors, batches that broadcast, a @ a^T, linear -> eval batch norm), cat,
// index_select / gather with index constants (valid, and rarely one out of range), and now and
// then a 4-D image through conv2d (+ bias, + eval batch norm, + relu) or pooling; int64 blocks
// (wrapping arithmetic, truncating division, int64 reductions and selects); "rule baits", an
// input or value combined with a scalar the rewrite rules key on. Graphs are float32 or float64.
// Constants hold special values (fuzz/special_values.h): scalars the rules key on (±0, ±1, 2^k),
// NaN, ±inf, subnormals, extremes, int64 limits; each graph draws the share of special elements
// in its constant tensors. Clamp bounds may be infinite, signed zeros or absent; pow exponents
// special. Every node passes its op's shape rule (a rejected one is replaced by another);
// tensors stay small so a case runs in well under a millisecond.
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
