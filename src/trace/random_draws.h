// Running a graph that draws random numbers (it takes the generator state as an input and returns
// the advanced state) as one reservation from the default generator, like an eager draw: calls on
// several threads, and eager draws between them, get disjoint blocks of the stream instead of
// reading the same state and drawing the same numbers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::trace {

class RandomDraws {
 public:
  // `run(state)` executes the graph with the generator state tensor `state` (Int64 [2]) as its
  // rng input and returns its outputs, the advanced state last. The graph draws the same number of
  // blocks on every call (it depends on shapes and attributes only), learnt on the first call: the
  // first call runs at the current state and then reserves that many blocks; when another draw
  // came in between, it runs again on its own reserved blocks. Later calls reserve first.
  std::vector<Tensor> run(const std::function<std::vector<Tensor>(const Tensor& state)>& run);

  // Blocks one call draws; -1 before the first call.
  int64_t blocks() const { return blocks_.load(); }

 private:
  std::atomic<int64_t> blocks_{-1};
};

}  // namespace smelt::trace
