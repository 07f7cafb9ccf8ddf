#include "passes/min_cut.h"

#include <algorithm>
#include <queue>

#include "smelt/error.h"

namespace smelt::passes {

FlowNetwork::FlowNetwork(int nodes)
    : out_(size_t(nodes)), level_(size_t(nodes)), next_edge_(size_t(nodes)), reached_(size_t(nodes)) {}

void FlowNetwork::add_edge(int from, int to, int64_t capacity) {
  SMELT_INTERNAL_CHECK(from >= 0 && to >= 0 && size_t(from) < out_.size() && size_t(to) < out_.size())
      << "FlowNetwork: edge " << from << " -> " << to << " outside " << out_.size() << " nodes";
  capacity = std::clamp<int64_t>(capacity, 0, kInfinite);
  out_[size_t(from)].push_back(int(edges_.size()));
  edges_.push_back({to, capacity});
  out_[size_t(to)].push_back(int(edges_.size()));
  edges_.push_back({from, 0});
}

// Breadth-first levels over edges with residual capacity; true when the sink is reached.
bool FlowNetwork::levels_from(int source, int sink) {
  std::fill(level_.begin(), level_.end(), -1);
  std::queue<int> queue;
  level_[size_t(source)] = 0;
  queue.push(source);
  while (!queue.empty()) {
    const int v = queue.front();
    queue.pop();
    for (int e : out_[size_t(v)]) {
      const Edge& edge = edges_[size_t(e)];
      if (edge.capacity > 0 && level_[size_t(edge.to)] < 0) {
        level_[size_t(edge.to)] = level_[size_t(v)] + 1;
        queue.push(edge.to);
      }
    }
  }
  return level_[size_t(sink)] >= 0;
}

// One augmenting path of at most `limit` along increasing levels; the flow it carried.
int64_t FlowNetwork::push(int v, int sink, int64_t limit) {
  if (v == sink) return limit;
  for (int& i = next_edge_[size_t(v)]; i < int(out_[size_t(v)].size()); ++i) {
    const int e = out_[size_t(v)][size_t(i)];
    Edge& edge = edges_[size_t(e)];
    if (edge.capacity <= 0 || level_[size_t(edge.to)] != level_[size_t(v)] + 1) continue;
    const int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
    if (pushed > 0) {
      edge.capacity -= pushed;
      edges_[size_t(e ^ 1)].capacity += pushed;
      return pushed;
    }
  }
  return 0;
}

int64_t FlowNetwork::max_flow(int source, int sink) {
  int64_t flow = 0;
  while (levels_from(source, sink)) {
    std::fill(next_edge_.begin(), next_edge_.end(), 0);
    while (const int64_t pushed = push(source, sink, kInfinite)) flow += pushed;
  }
  // The source side of the cut: what the source still reaches through residual capacity.
  levels_from(source, sink);
  for (size_t v = 0; v < level_.size(); ++v) reached_[v] = level_[v] >= 0;
  return flow;
}

}  // namespace smelt::passes
