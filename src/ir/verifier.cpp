#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

#include "ir/printer.h"
#include "ops/dispatch.h"

namespace smelt::ir {

void verify(const Graph& g) {
  std::unordered_set<const Value*> defined;
  for (const Value* v : g.inputs()) {
    SMELT_CHECK(v->is_graph_input()) << "verify: graph input " << value_ref(v) << " has kind "
                                     << value_kind_name(v->kind);
    defined.insert(v);
  }
  for (const Value* c : g.constants()) {
    SMELT_CHECK(c->kind == ValueKind::Constant && c->constant.defined())
        << "verify: constant " << value_ref(c) << " has no tensor";
    SMELT_CHECK(c->constant.shape() == c->meta.shape && c->constant.dtype() == c->meta.dtype)
        << "verify: constant " << value_ref(c) << " is declared " << meta_str(c->meta)
        << " but holds " << shape_str(c->constant.shape());
    defined.insert(c);
  }
  std::unordered_set<const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.insert(n.get());

  for (const auto& n : g.nodes()) {
    std::vector<ops::TensorMeta> in_metas;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      SMELT_CHECK(defined.count(v)) << "verify: " << n->name() << " reads " << value_ref(v)
                                    << " before it is defined (not in topological order, or a cycle)";
      long edges = std::count(v->uses.begin(), v->uses.end(), Use{n.get(), int(i)});
      SMELT_CHECK(edges == 1) << "verify: use list of " << value_ref(v) << " has " << edges
                              << " entries for input " << i << " of " << n->name();
      in_metas.push_back(v->meta);
    }
    std::vector<ops::TensorMeta> out_metas;
    try {
      out_metas = ops::infer_shape(n->op, in_metas, n->attrs);
    } catch (const Error& e) {
      SMELT_CHECK(false) << "verify: " << n->name() << " is invalid: " << e.what();
    }
    SMELT_CHECK(out_metas.size() == n->outputs.size())
        << "verify: " << n->name() << " has " << n->outputs.size() << " outputs, its op makes "
        << out_metas.size();
    for (size_t k = 0; k < out_metas.size(); ++k) {
      const Value* out = n->outputs[k];
      SMELT_CHECK(out->producer == n.get() && out->output_index == int(k))
          << "verify: " << value_ref(out) << " does not point back at its producer " << n->name();
      SMELT_CHECK(out->meta == out_metas[k])
          << "verify: " << value_ref(out) << " is " << meta_str(out->meta) << " but " << n->name()
          << " computes " << meta_str(out_metas[k]);
      SMELT_CHECK(defined.insert(out).second) << "verify: " << value_ref(out) << " is defined twice";
    }
  }
  // Every use must be an edge of a live node.
  for (const Value* v : defined) {
    for (const Use& u : v->uses) {
      SMELT_CHECK(nodes.count(u.node) && u.index >= 0 && size_t(u.index) < u.node->inputs.size() &&
                  u.node->inputs[size_t(u.index)] == v)
          << "verify: use list of " << value_ref(v) << " names an edge that does not exist";
    }
  }
  for (const Value* out : g.outputs()) {
    SMELT_CHECK(defined.count(out)) << "verify: graph output " << value_ref(out) << " is not defined";
  }
}

}  // namespace smelt::ir
