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

// The row ops are decomposed as the eager row kernels compute them (kernels/softmax.cpp,
// kernels/norm.cpp), double where they use double, so a compiled row op differs from the eager
// one only in the order of the double additions: sums and the statistics of layer_norm in double,
// then rounded once. (A float32 decomposition was less accurate than eager smelt: fuzz --compile
// found layer_norm of a constant row and log_softmax next to 1 differing by far more than
// rounding once a division magnified them.)
ir::Value* widened(Builder& b, ir::Value* x) {
  return x->meta.dtype == DType::Float32 ? b.op(OpId::cast, {x}, {{"dtype", DType::Float64}}) : x;
}
ir::Value* narrowed(Builder& b, ir::Value* x, DType dtype) {
  return x->meta.dtype == dtype ? x : b.op(OpId::cast, {x}, {{"dtype", dtype}});
}

// softmax: e = exp(x - max), s = sum(e) in double, y = e * T(1 / s);
// log_softmax: y = (x - max) - T(log(s)).
void expand_softmax(ir::Graph& g, ir::Node* node, bool log) {
  Builder b{g, node};
  ir::Value* x = node->inputs[0];
  const DType dtype = x->meta.dtype;
  const int64_t rank = int64_t(x->meta.shape.size());
  const std::vector<int64_t> dims = rank == 0 ? std::vector<int64_t>{}
                                              : std::vector<int64_t>{wrap_dim(node->attrs.get_int("dim"), rank, "softmax")};
  ir::Value* shifted = b.op(OpId::sub, {x, b.reduce(OpId::amax, x, dims)});
  ir::Value* e = b.op(OpId::exp, {shifted});
  ir::Value* s = b.reduce(OpId::sum, widened(b, e), dims);
  ir::Value* y = nullptr;
  if (log) {
    y = b.op(OpId::sub, {shifted, narrowed(b, b.op(OpId::log, {s}), dtype)});
  } else {
    ir::Value* inv = b.op(OpId::div, {b.scalar(1.0, s->meta.dtype), s});
    y = b.op(OpId::mul, {e, narrowed(b, inv, dtype)});
  }
  g.replace_all_uses(node->outputs[0], y);
}

// In double: mu = mean(x), c = x - mu, rstd = 1 / sqrt(mean(c * c) + eps); then
// y = T(c * rstd) * w + b, mean = T(mu), rstd = T(rstd).
void expand_layer_norm(ir::Graph& g, ir::Node* node) {
  Builder b{g, node};
  ir::Value* x = node->inputs[0];
  const DType dtype = x->meta.dtype;
  const int64_t rank = int64_t(x->meta.shape.size()), ndim = node->attrs.get_int("ndim");
  std::vector<int64_t> dims;
  for (int64_t d = rank - ndim; d < rank; ++d) dims.push_back(d);
  ir::Value* xd = widened(b, x);
  ir::Value* mu = b.reduce(OpId::mean, xd, dims);
  ir::Value* c = b.op(OpId::sub, {xd, mu});
  ir::Value* var = b.reduce(OpId::mean, b.op(OpId::mul, {c, c}), dims);
  ir::Value* eps = b.scalar(node->attrs.get_float("eps"), xd->meta.dtype);
  ir::Value* rstd = b.op(OpId::rsqrt, {b.op(OpId::add, {var, eps})});
  ir::Value* normalized = narrowed(b, b.op(OpId::mul, {c, rstd}), dtype);
  ir::Value* y = b.op(OpId::add, {b.op(OpId::mul, {normalized, node->inputs[1]}), node->inputs[2]});
  g.replace_all_uses(node->outputs[0], y);
  g.replace_all_uses(node->outputs[1], narrowed(b, mu, dtype));
  g.replace_all_uses(node->outputs[2], narrowed(b, rstd, dtype));
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
