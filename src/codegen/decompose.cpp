#include "codegen/decompose.h"

#include "smelt/creation.h"

namespace smelt::codegen {
namespace {

using ops::OpId;

bool is_row_op(OpId op) {
  return op == OpId::softmax || op == OpId::log_softmax || op == OpId::layer_norm;
}

// Inserts nodes before `at`, one call each.
struct Builder {
  ir::Graph& g;
  ir::Node* at;
  ir::Value* op(OpId id, std::vector<ir::Value*> in, const ops::Attrs& attrs = {}) {
    return g.insert_node(at, id, in, attrs)->outputs[0];
  }
  ir::Value* reduce(OpId id, ir::Value* x, const std::vector<int64_t>& dims) {
    return op(id, {x}, {{"dims", dims}, {"keepdim", int64_t(1)}});
  }
  ir::Value* scalar(double v, DType dtype) { return g.add_constant(scalar_tensor(v, dtype)); }
};

void expand_softmax(ir::Graph& g, ir::Node* node, bool log) {
  Builder b{g, node};
  ir::Value* x = node->inputs[0];
  const int64_t rank = int64_t(x->meta.shape.size());
  const std::vector<int64_t> dims = rank == 0 ? std::vector<int64_t>{}
                                              : std::vector<int64_t>{wrap_dim(node->attrs.get_int("dim"), rank, "softmax")};
  ir::Value* shifted = b.op(OpId::sub, {x, b.reduce(OpId::amax, x, dims)});
  ir::Value* e = b.op(OpId::exp, {shifted});
  ir::Value* s = b.reduce(OpId::sum, e, dims);
  ir::Value* y = log ? b.op(OpId::sub, {shifted, b.op(OpId::log, {s})}) : b.op(OpId::div, {e, s});
  g.replace_all_uses(node->outputs[0], y);
}

void expand_layer_norm(ir::Graph& g, ir::Node* node) {
  Builder b{g, node};
  ir::Value* x = node->inputs[0];
  const int64_t rank = int64_t(x->meta.shape.size()), ndim = node->attrs.get_int("ndim");
  std::vector<int64_t> dims;
  for (int64_t d = rank - ndim; d < rank; ++d) dims.push_back(d);
  ir::Value* mu = b.reduce(OpId::mean, x, dims);
  ir::Value* c = b.op(OpId::sub, {x, mu});
  ir::Value* var = b.reduce(OpId::mean, b.op(OpId::mul, {c, c}), dims);
  ir::Value* eps = b.scalar(node->attrs.get_float("eps"), x->meta.dtype);
  ir::Value* rstd = b.op(OpId::rsqrt, {b.op(OpId::add, {var, eps})});
  ir::Value* y = b.op(OpId::add, {b.op(OpId::mul, {b.op(OpId::mul, {c, rstd}), node->inputs[1]}),
                                  node->inputs[2]});
  g.replace_all_uses(node->outputs[0], y);
  g.replace_all_uses(node->outputs[1], mu);
  g.replace_all_uses(node->outputs[2], rstd);
}

}  // namespace

bool has_row_ops(const ir::Graph& graph) {
  for (const auto& n : graph.nodes()) {
    if (is_row_op(n->op)) return true;
  }
  return false;
}

std::unique_ptr<ir::Graph> decompose_row_ops(const ir::Graph& graph) {
  std::unique_ptr<ir::Graph> g = graph.clone();
  std::vector<ir::Node*> row_nodes;
  for (const auto& n : g->nodes()) {
    if (is_row_op(n->op)) row_nodes.push_back(n.get());
  }
  for (ir::Node* node : row_nodes) {
    if (node->op == OpId::layer_norm) {
      expand_layer_norm(*g, node);
    } else {
      expand_softmax(*g, node, node->op == OpId::log_softmax);
    }
    g->erase_node(node);
  }
  return g;
}

}  // namespace smelt::codegen
