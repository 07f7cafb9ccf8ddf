#include "passes/cse.h"

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/constant.h"
#include "ir/printer.h"

namespace smelt::passes {
namespace {

// Constants above this many elements are not compared (the comparison would cost more than
// the duplicate).
constexpr int64_t kMaxMergedConstant = 4096;

// A node's identity: op, attribute text, input value ids, and for a group node its body's text.
using NodeKey = std::tuple<int, std::string, std::vector<int>>;

std::string attrs_key(const ops::Attrs& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs.items()) s += k + "=" + ops::attr_value_str(v) + ";";
  return s;
}

}  // namespace

bool cse(ir::Graph& graph) {
  bool changed = false;
  // Constants: same dtype, shape and bits (NaN payloads, the sign of zero and every int64 digit
  // count; ir/constant.h).
  std::map<std::tuple<int, Shape, std::string>, ir::Value*> seen_constants;
  for (ir::Value* c : graph.constants()) {
    if (c->constant.numel() > kMaxMergedConstant || c->uses.empty()) continue;
    auto key = std::make_tuple(int(c->meta.dtype), c->meta.shape, ir::constant_bytes(c->constant));
    auto [it, inserted] = seen_constants.emplace(std::move(key), c);
    if (!inserted) {
      graph.replace_all_uses(c, it->second);
      changed = true;
    }
  }
  std::map<NodeKey, ir::Node*> seen;
  std::vector<ir::Node*> merged;  // duplicates that must run unread: their twin checks the same values
  for (const auto& n : graph.nodes()) {
    if (!ops::is_pure(n->op)) continue;  // random or writing an input: never merged
    std::vector<int> ids;
    for (const ir::Value* v : n->inputs) ids.push_back(v->id);
    // add(a, b) and add(b, a) are one value: the operands of a commutative op are keyed in id
    // order (the table's kCommutative ops give the same bits in either order; see
    // tests/passes/commutative_flags_test.cpp), so cse merges them even before canonicalize runs.
    if ((ops::op_info(n->op).flags & ops::kCommutative) && ids.size() == 2 && ids[1] < ids[0]) {
      std::swap(ids[0], ids[1]);
    }
    std::string attrs = attrs_key(n->attrs);
    if (n->body) attrs += "body=" + ir::print(*n->body);
    NodeKey key{int(n->op), std::move(attrs), std::move(ids)};
    auto [it, inserted] = seen.emplace(std::move(key), n.get());
    if (inserted) continue;
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      if (n->outputs[k]->is_dead()) continue;
      graph.replace_all_uses(n->outputs[k], it->second->outputs[k]);
      changed = true;
    }
    if (n->must_run()) merged.push_back(n.get());
  }
  // (dce keeps a node that may refuse its values even unread; this one's twin stays and refuses
  // exactly what it would, so it goes.)
  for (ir::Node* n : merged) graph.erase_node(n);
  return changed || !merged.empty();
}

}  // namespace smelt::passes
