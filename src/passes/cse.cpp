#include "passes/cse.h"

#include <map>
#include <tuple>
#include <vector>

#include "ir/printer.h"

namespace smelt::passes {
namespace {

// Constants above this many elements are not compared (the comparison would cost more than
// the duplicate).
constexpr int64_t kMaxMergedConstant = 4096;

// A node's identity: op, attribute text, input value ids.
using NodeKey = std::tuple<int, std::string, std::vector<int>>;

std::string attrs_key(const ops::Attrs& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs.items()) s += k + "=" + ops::attr_value_str(v) + ";";
  return s;
}

}  // namespace

bool cse(ir::Graph& graph) {
  bool changed = false;
  // constants: same dtype, shape and elements
  std::map<std::tuple<int, Shape, std::vector<double>>, ir::Value*> seen_constants;
  for (ir::Value* c : graph.constants()) {
    if (c->constant.numel() > kMaxMergedConstant || c->uses.empty()) continue;
    auto key = std::make_tuple(int(c->meta.dtype), c->meta.shape, c->constant.to_vector());
    auto [it, inserted] = seen_constants.emplace(key, c);
    if (!inserted) {
      graph.replace_all_uses(c, it->second);
      changed = true;
    }
  }
  std::map<NodeKey, ir::Node*> seen;
  for (const auto& n : graph.nodes()) {
    if (!ops::is_pure(n->op)) continue;  // random or writing an input: never merged
    std::vector<int> ids;
    for (const ir::Value* v : n->inputs) ids.push_back(v->id);
    NodeKey key{int(n->op), attrs_key(n->attrs), ids};
    auto [it, inserted] = seen.emplace(key, n.get());
    if (inserted) continue;
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      if (n->outputs[k]->uses.empty() && !graph.is_output(n->outputs[k])) continue;
      graph.replace_all_uses(n->outputs[k], it->second->outputs[k]);
      changed = true;
    }
  }
  return changed;
}

}  // namespace smelt::passes
