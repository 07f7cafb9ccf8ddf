#include "ir/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"
#include "ops/dispatch.h"

namespace smelt::ir {
namespace {

std::vector<ops::TensorMeta> group_output_metas(const Node& n, int depth);

void verify_graph(const Graph& g, int depth) {
  SMELT_CHECK(depth < 64) << "verify: group bodies nest more than 64 levels deep";
  std::unordered_set<const Value*> defined;
  defined.reserve(g.inputs().size() + g.constants().size() + 2 * g.num_nodes());
  for (const Value* v : g.inputs()) {
    SMELT_CHECK(v->is_graph_input()) << "verify: graph input " << value_ref(v) << " has kind "
                                     << value_kind_name(v->kind);
    SMELT_CHECK(defined.insert(v).second) << "verify: graph input " << value_ref(v) << " is listed twice";
  }
  for (const Value* c : g.constants()) {
    SMELT_CHECK(c->kind == ValueKind::Constant && c->constant.defined())
        << "verify: constant " << value_ref(c) << " has no tensor";
    SMELT_CHECK(c->constant.shape() == c->meta.shape && c->constant.dtype() == c->meta.dtype)
        << "verify: constant " << value_ref(c) << " is declared " << meta_str(c->meta)
        << " but holds " << shape_str(c->constant.shape());
    SMELT_CHECK(defined.insert(c).second) << "verify: constant " << value_ref(c) << " is listed twice";
  }

  size_t edges = 0;
  for (const auto& n : g.nodes()) {
    SMELT_CHECK((n->op == ops::OpId::group) == bool(n->body))
        << "verify: " << n->name() << (n->body ? " holds a body (only group nodes do)" : " has no body graph");
    std::vector<ops::TensorMeta> in_metas;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      SMELT_CHECK(defined.count(v)) << "verify: " << n->name() << " reads " << value_ref(v)
                                    << " before it is defined (not in topological order, or a cycle)";
      // Each edge sits at its recorded slot; with the count check below, use lists match the
      // edges exactly, in time linear in the edges.
      size_t slot = n->use_slot(i);
      SMELT_CHECK(slot < v->uses.size() && v->uses[slot] == (Use{n.get(), int(i)}))
          << "verify: use list of " << value_ref(v) << " has no entry for input " << i << " of " << n->name();
      ++edges;
      in_metas.push_back(v->meta);
    }
    std::vector<ops::TensorMeta> out_metas;
    if (n->body) {
      out_metas = group_output_metas(*n, depth);
    } else {
      try {
        out_metas = ops::infer_shape(n->op, in_metas, n->attrs);
      } catch (const Error& e) {
        SMELT_CHECK(false) << "verify: " << n->name() << " is invalid: " << e.what();
      }
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
  size_t uses = 0;
  for (const Value* v : defined) uses += v->uses.size();
  SMELT_CHECK(uses == edges) << "verify: use lists hold " << uses << " entries for " << edges
                             << " edges (an entry names an edge that does not exist)";

  std::unordered_map<const Value*, int> output_refs;
  for (const Value* out : g.outputs()) {
    SMELT_CHECK(defined.count(out)) << "verify: graph output " << value_ref(out) << " is not defined";
    ++output_refs[out];
  }
  for (const Value* v : defined) {
    auto it = output_refs.find(v);
    int want = it == output_refs.end() ? 0 : it->second;
    SMELT_CHECK(v->output_refs == want) << "verify: " << value_ref(v) << " is marked as " << v->output_refs
                                        << " graph output(s) but is listed " << want << " time(s)";
  }
  for (const auto& [o, i] : g.updates()) {
    SMELT_CHECK(o < g.outputs().size() && i < g.inputs().size())
        << "verify: output " << o << " updates input " << i << ", out of range";
    SMELT_CHECK(g.outputs()[o]->meta == g.inputs()[i]->meta)
        << "verify: output " << o << " " << value_ref(g.outputs()[o]) << " updates input "
        << value_ref(g.inputs()[i]) << " of another shape or dtype";
  }
}

// A group's body is a valid graph whose inputs match the node's inputs and whose outputs are
// the node's outputs, in number and meta.
std::vector<ops::TensorMeta> group_output_metas(const Node& n, int depth) {
  const Graph& body = *n.body;
  try {
    verify_graph(body, depth + 1);
  } catch (const Error& e) {
    SMELT_CHECK(false) << "verify: in the body of a group node: " << e.what();
  }
  SMELT_CHECK(body.inputs().size() == n.inputs.size())
      << "verify: group has " << n.inputs.size() << " inputs, its body " << body.inputs().size();
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    SMELT_CHECK(body.inputs()[i]->meta == n.inputs[i]->meta)
        << "verify: group input " << i << " is " << meta_str(n.inputs[i]->meta) << ", its body's is "
        << meta_str(body.inputs()[i]->meta);
  }
  std::vector<ops::TensorMeta> metas;
  for (const Value* out : body.outputs()) metas.push_back(out->meta);
  return metas;
}

}  // namespace

void verify(const Graph& g) { verify_graph(g, 0); }

}  // namespace smelt::ir
