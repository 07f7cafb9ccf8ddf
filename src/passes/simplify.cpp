// Floating-point policy: a rule fires only when its result is bit-identical to the original for
// every input, IEEE specials included (quieting a signaling NaN aside). So:
//   - x + c -> x only for c = -0 (x + (+0) turns x = -0 into +0); x - c -> x only for c = +0;
//   - x * 1 -> x and x / 1 -> x (exactly 1: constants compare by bits, never through double);
//   - x * 0 -> 0 and x - x -> 0 apply to int64 only (inf * 0 and inf - inf are NaN, and -1 * 0
//     is -0); when x is a constant, fold computes the exact answer instead;
//   - x / 2^k -> x * 2^-k: both are the correctly rounded value of the same real number.
// `1 / (1 / x) -> x` is not a rule: 1 / (1 / 3) rounds to 3.0000000000000004 in f64.
// Rules that need matching shapes decline when an operand would broadcast x to a larger shape.
#include "passes/simplify.h"

#include <cmath>
#include <numeric>

#include "smelt/creation.h"

namespace smelt::passes {
namespace {

using ir::Match;
using ir::Pattern;
using ir::Value;
using ops::OpId;

const ops::TensorMeta& root_meta(const Match& m) { return m.root->outputs[0]->meta; }

// `v` itself stands for the matched value only if it has the same shape and dtype.
Value* same_meta_or_null(const Match& m, Value* v) { return v->meta == root_meta(m) ? v : nullptr; }

bool is_integer(const Value* v) { return dtype_is_signed_integer(v->meta.dtype); }
bool is_floating(const Value* v) { return dtype_is_floating(v->meta.dtype); }

// Zeros of the matched value's meta: a scalar constant, broadcast by an expand (a view) so the
// graph never stores a large tensor of zeros; fold materializes it when it is small.
Value* zeros_like_root(ir::Graph& g, const Match& m) {
  const ops::TensorMeta& meta = root_meta(m);
  Value* zero = g.add_constant(scalar_tensor(0, meta.dtype));
  if (meta.shape.empty()) return zero;
  return g.insert_node(m.root, OpId::expand, {zero}, {{"shape", meta.shape}})->outputs[0];
}

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

// A permutation's dims, wrapped to [0, rank).
std::vector<int64_t> permutation(const ir::Node* node) {
  std::vector<int64_t> dims = node->attrs.get_ints("dims");
  for (int64_t& d : dims) d = wrap(d, dims.size());
  return dims;
}

bool is_identity_permutation(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != int64_t(i)) return false;
  }
  return true;
}

// A slice that keeps every element of its dim.
bool is_full_slice(const Value* v) {
  const ir::Node* n = v->producer;
  const Shape& shape = n->inputs[0]->meta.shape;
  int64_t dim = wrap(n->attrs.get_int("dim"), shape.size());
  return n->attrs.get_int("start") == 0 && n->attrs.get_int("end") == shape[size_t(dim)] &&
         n->attrs.get_int("step") == 1;
}

// 1 / c is exactly representable for a constant c made of powers of two (and 1/c neither
// overflows nor leaves the dtype's range), so x / c and x * (1 / c) round to the same result.
bool has_exact_reciprocal(const Value* c) {
  if (!is_floating(c) || c->constant.numel() == 0) return false;
  for (double v : c->constant.to_vector()) {
    int exponent = 0;
    if (!std::isfinite(v) || std::fabs(std::frexp(v, &exponent)) != 0.5) return false;
    double r = 1.0 / v;
    if (c->meta.dtype == DType::Float32 && double(float(r)) != r) return false;
    if (!std::isfinite(r) || r == 0) return false;
  }
  return true;
}

Value* reciprocal_constant(ir::Graph& g, const Value* c) {
  std::vector<double> values = c->constant.to_vector();
  for (double& v : values) v = 1.0 / v;
  return g.add_constant(from_vector(values, c->meta.shape, c->meta.dtype));
}

bool is_eval_dropout(const Value* v) { return v->producer->attrs.get_float("training", 1.0) == 0.0; }

// Dropout in eval mode is the identity on its first output. Only rewritten when nothing reads the
// mask or the returned generator state (no use, not a graph output), so the whole node can
// disappear.
bool mask_unused(const ir::Graph& g, const ir::Node* n) {
  for (size_t k = 1; k < n->outputs.size(); ++k) {
    if (!n->outputs[k]->uses.empty() || g.is_output(n->outputs[k])) return false;
  }
  return true;
}

std::vector<ir::RewriteRule> make_simplify_rules() {
  std::vector<ir::RewriteRule> rules = {
      // add(x, -0) -> x  (and -0 + x: add is commutative); for integers, add(x, 0) -> x
      {"add(x, -0) -> x", Pattern::op(OpId::add, {Pattern::any("x"), Pattern::scalar(-0.0)}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // sub(x, +0) -> x
      {"sub(x, +0) -> x", Pattern::op(OpId::sub, {Pattern::any("x"), Pattern::scalar(0.0)}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // mul(x, 1) -> x  (and 1 * x)
      {"mul(x, 1) -> x", Pattern::op(OpId::mul, {Pattern::any("x"), Pattern::scalar(1)}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // div(x, 1) -> x
      {"div(x, 1) -> x", Pattern::op(OpId::div, {Pattern::any("x"), Pattern::scalar(1)}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // mul(x, 0) -> 0  for integer x only (inf * 0 is NaN)
      {"mul(x, 0) -> 0 [integer]", Pattern::op(OpId::mul, {Pattern::any("x").where(is_integer), Pattern::scalar(0)}),
       [](ir::Graph& g, const Match& m) { return zeros_like_root(g, m); }},
      // sub(x, x) -> 0  for integer x only (inf - inf is NaN)
      {"sub(x, x) -> 0 [integer]", Pattern::op(OpId::sub, {Pattern::any("x").where(is_integer), Pattern::any("x")}),
       [](ir::Graph& g, const Match& m) { return zeros_like_root(g, m); }},
      // neg(neg(x)) -> x
      {"neg(neg(x)) -> x", Pattern::op(OpId::neg, {Pattern::op(OpId::neg, {Pattern::any("x")})}),
       [](ir::Graph&, const Match& m) { return m["x"]; }},
      // div(x, c) -> mul(x, 1/c)  when every element of c is a power of two (1/c is exact)
      {"div(x, 2^k) -> mul(x, 2^-k)",
       Pattern::op(OpId::div, {Pattern::any("x"), Pattern::constant("c").where(has_exact_reciprocal)}),
       [](ir::Graph& g, const Match& m) -> Value* {
         return g.insert_node(m.root, OpId::mul, {m["x"], reciprocal_constant(g, m["c"])}, {})->outputs[0];
       }},
      // permute(x, identity) -> x
      {"permute(x, identity) -> x",
       Pattern::op(OpId::permute, {Pattern::any("x")}).where([](const Value* v) {
         return is_identity_permutation(permutation(v->producer));
       }),
       [](ir::Graph&, const Match& m) { return m["x"]; }},
      // permute(permute(x, p), q) -> permute(x, p[q])  (x itself when the composition is identity)
      {"permute(permute(x, p), q) -> permute(x, p[q])",
       Pattern::op(OpId::permute, {Pattern::op(OpId::permute, {Pattern::any("x")}, "inner")}),
       [](ir::Graph& g, const Match& m) -> Value* {
         std::vector<int64_t> p = permutation(m["inner"]->producer), q = permutation(m.root);
         std::vector<int64_t> composed;
         for (int64_t i : q) composed.push_back(p[size_t(i)]);
         if (is_identity_permutation(composed)) return m["x"];
         return g.insert_node(m.root, OpId::permute, {m["x"]}, {{"dims", composed}})->outputs[0];
       }},
      // reshape(x, shape of x) -> x
      {"reshape(x, x.shape) -> x", Pattern::op(OpId::reshape, {Pattern::any("x")}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // reshape(reshape(x, s1), s2) -> reshape(x, s2)
      {"reshape(reshape(x, s1), s2) -> reshape(x, s2)",
       Pattern::op(OpId::reshape, {Pattern::op(OpId::reshape, {Pattern::any("x")})}),
       [](ir::Graph& g, const Match& m) -> Value* {
         return g.insert_node(m.root, OpId::reshape, {m["x"]}, m.root->attrs)->outputs[0];
       }},
      // expand(x, shape of x) -> x
      {"expand(x, x.shape) -> x", Pattern::op(OpId::expand, {Pattern::any("x")}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // expand(expand(x, s1), s2) -> expand(x, s2)  (a dim of x is 1 or kept by both expands)
      {"expand(expand(x, s1), s2) -> expand(x, s2)",
       Pattern::op(OpId::expand, {Pattern::op(OpId::expand, {Pattern::any("x")})}),
       [](ir::Graph& g, const Match& m) -> Value* {
         return g.insert_node(m.root, OpId::expand, {m["x"]}, m.root->attrs)->outputs[0];
       }},
      // slice(x, dim, 0, size, 1) -> x
      {"slice(x, whole dim) -> x", Pattern::op(OpId::slice, {Pattern::any("x")}).where(is_full_slice),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // cast(x, dtype of x) -> x
      {"cast(x, x.dtype) -> x", Pattern::op(OpId::cast, {Pattern::any("x")}),
       [](ir::Graph&, const Match& m) { return same_meta_or_null(m, m["x"]); }},
      // contiguous(contiguous(x)) -> contiguous(x)
      {"contiguous(contiguous(x)) -> contiguous(x)",
       Pattern::op(OpId::contiguous, {Pattern::op(OpId::contiguous, {Pattern::any()}, "inner")}),
       [](ir::Graph&, const Match& m) { return m["inner"]; }},
  };
  // dropout(x, state, training=0) -> x  when the mask and the returned state are unused. Looked
  // up by name: the op table may be built without dropout.
  ops::OpId dropout;
  if (ops::op_from_name("dropout", &dropout)) {
    rules.push_back({"dropout(x, state, training=0) -> x",
                     Pattern::op(dropout, {Pattern::any("x"), Pattern::any()}).where(is_eval_dropout),
                     [](ir::Graph& g, const Match& m) {
                       return mask_unused(g, m.root) ? same_meta_or_null(m, m["x"]) : nullptr;
                     }});
  }
  return rules;
}

}  // namespace

const std::vector<ir::RewriteRule>& simplify_rules() {
  static const std::vector<ir::RewriteRule> kRules = make_simplify_rules();
  return kRules;
}

bool simplify(ir::Graph& graph) { return ir::apply_rules(graph, simplify_rules()); }

}  // namespace smelt::passes
