// A minimum s-t cut of a small directed graph with integer capacities (Dinic's max flow): what
// the training partitioner (passes/partition.h) asks to choose between saving a value for the
// backward and recomputing it there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smelt::passes {

class FlowNetwork {
 public:
  // Large enough that no sum of real capacities (bytes) reaches it, small enough that a few
  // hundred of them do not overflow int64.
  static constexpr int64_t kInfinite = int64_t(1) << 52;

  explicit FlowNetwork(int nodes);
  // Capacities are clamped to [0, kInfinite].
  void add_edge(int from, int to, int64_t capacity);
  // The maximum flow from `source` to `sink` (= the capacity of a minimum cut); afterwards
  // source_side(v) says on which side of that cut v lies.
  int64_t max_flow(int source, int sink);
  bool source_side(int v) const { return reached_[size_t(v)]; }

 private:
  struct Edge {
    int to;
    int64_t capacity;  // residual
  };
  bool levels_from(int source, int sink);
  int64_t push(int v, int sink, int64_t limit);

  std::vector<Edge> edges_;             // edge e and its reverse e ^ 1
  std::vector<std::vector<int>> out_;   // per node, its edges
  std::vector<int> level_, next_edge_;
  std::vector<bool> reached_;
};

}  // namespace smelt::passes
