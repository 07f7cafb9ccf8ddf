#include "codegen/lower.h"

#include "codegen/decompose.h"
#include "codegen/lowerer.h"
#include "codegen/online_sumexp.h"
#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt::codegen {
namespace detail {

using ops::reduced_shape;

LoopKernel Lowerer::run(const std::string& name) {
  k_.name = name;
  find_space();
  bind_args();
  assign_stages();
  for (size_t o = 0; o < body_.outputs().size(); ++o) store_output(o);
  k_.stages = loop_stages_;
  // Row stores and row expressions are numbered stages == loop_stages_, fixed up now that the
  // stage count is known.
  for (Expr& e : k_.exprs) if (e.stage == kRowStage) e.stage = loop_stages_;
  for (Store& s : k_.stores) if (s.stage == kRowStage) s.stage = loop_stages_;
  if (options_.tile_col_dims > 0) {
    detail::tile_space(k_, space_, size_t(options_.tile_col_dims), !reductions_.empty());
  } else {
    detail::simplify_space(k_, space_, n_outer_, !reductions_.empty(), !options_.size_generic);
  }
  return std::move(k_);
}

void Lowerer::find_space() {
  for (const auto& n : body_.nodes()) {
    if (!is_reduce(n->op)) continue;
    const Shape& in = n->inputs[0]->meta.shape;
    std::vector<int64_t> dims = reduce_dims_of(*n);
    if (reductions_.empty()) {
      shape_ = in;
      dims_ = dims;
    } else if (in != shape_ || dims != dims_) {
      throw CannotLower{"reductions over different shapes or dims (" + shape_str(shape_) + " vs " +
                        shape_str(in) + ")"};
    }
    reductions_.push_back(n.get());
  }
  if (reductions_.empty()) {
    if (body_.outputs().empty()) throw CannotLower{"a group without outputs"};
    shape_ = body_.outputs()[0]->meta.shape;
  }
  std::vector<int64_t> outer, inner;
  for (int64_t d = 0; d < int64_t(shape_.size()); ++d) {
    (std::binary_search(dims_.begin(), dims_.end(), d) ? inner : outer).push_back(d);
  }
  n_outer_ = outer.size();
  space_dim_ = outer;
  space_dim_.insert(space_dim_.end(), inner.begin(), inner.end());
  for (int64_t d : space_dim_) space_.push_back(shape_[d]);
}

std::vector<int64_t> Lowerer::reduce_dims_of(const ir::Node& n) const {
  const int64_t rank = int64_t(n.inputs[0]->meta.shape.size());
  std::vector<int64_t> dims;
  if (n.attrs.has("dims")) {
    for (int64_t d : n.attrs.get_ints("dims")) dims.push_back(wrap_dim(d, rank, n.name()));
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

void Lowerer::bind_args() {
  for (const ir::Value* v : body_.inputs()) {
    arg_of_[v] = int(k_.args.size());
    k_.args.push_back({v->meta.dtype, shape_numel(v->meta.shape), false});
  }
  for (const ir::Value* c : body_.constants()) {
    if (c->constant.numel() == 1) continue;  // inlined as a literal
    arg_of_[c] = int(k_.args.size());
    k_.args.push_back({c->meta.dtype, c->constant.numel(), false});
    result_.constants.push_back(c->constant.contiguous());
  }
  first_output_arg_ = int(k_.args.size());
  for (const ir::Value* v : body_.outputs()) {
    k_.args.push_back({v->meta.dtype, shape_numel(v->meta.shape), true});
  }
}

void Lowerer::assign_stages() {
  for (const auto& n : body_.nodes()) {
    int after = 0;
    for (const ir::Value* in : n->inputs) after = std::max(after, after_of(in));
    if (is_reduce(n->op)) {
      if (const ir::Value* x = online_sumexp_source(*n)) {
        online_source_[n.get()] = x;
        after = stage_of_.at(online_max_.at(n.get()));
      }
      stage_of_[n.get()] = after;
      loop_stages_ = std::max(loop_stages_, after + 1);
      after += 1;
    }
    for (const ir::Value* out : n->outputs) after_[out] = after;
  }
}

const ir::Value* Lowerer::online_sumexp_source(const ir::Node& n) {
  const ir::Node* m = nullptr;
  const ir::Value* x = online_sumexp_of(n, &m);
  if (!x || !stage_of_.count(m)) return nullptr;
  online_max_[&n] = m;
  return x;
}

int Lowerer::after_of(const ir::Value* v) const {
  auto it = after_.find(v);
  return it == after_.end() ? 0 : it->second;
}

Map Lowerer::natural_map(const Shape& shape) const {
  const size_t r = space_.size(), k = shape.size();
  Map m{std::vector<std::vector<int64_t>>(k, std::vector<int64_t>(r, 0)), std::vector<int64_t>(k, 0), {}};
  auto position = [&](int64_t d) {
    return size_t(std::find(space_dim_.begin(), space_dim_.end(), d) - space_dim_.begin());
  };
  if (!dims_.empty() && shape == reduced_shape(shape_, dims_, false)) {
    size_t e = 0;
    for (int64_t d = 0; d < int64_t(shape_.size()); ++d) {
      if (std::binary_search(dims_.begin(), dims_.end(), d)) continue;
      if (shape[e] != 1) m.rows[e][position(d)] = 1;
      ++e;
    }
    return m;
  }
  if (k <= shape_.size()) {
    bool broadcasts = true;
    for (size_t e = 0; e < k; ++e) {
      const int64_t d = int64_t(shape_.size() - k + e);
      if (shape[e] != shape_[d] && shape[e] != 1) broadcasts = false;
    }
    if (broadcasts) {
      for (size_t e = 0; e < k; ++e) {
        const int64_t d = int64_t(shape_.size() - k + e);
        if (shape[e] != 1) m.rows[e][position(d)] = 1;
      }
      return m;
    }
  }
  throw CannotLower{"a value of shape " + shape_str(shape) + " does not map onto the iteration space " +
                    shape_str(shape_)};
}

void Lowerer::store_output(size_t o) {
  const ir::Value* v = body_.outputs()[o];
  if (v->kind == ir::ValueKind::Computed && v->producer->op == OpId::nll_loss &&
      v->producer->attrs.get_int("reduction") != 0) {
    return fold_nll_loss(*v->producer, first_output_arg_ + int(o));
  }
  Map m = natural_map(v->meta.shape);
  // A row store when the value is the same along the inner dims, unless the output has the
  // space's own shape: then every reduced extent is 1 (layer_norm over a [.., 1] row) and the
  // value may load arguments, which only loop stages can; a loop store writes it once anyway.
  const bool row = !reductions_.empty() && v->meta.shape != shape_ && inner_invariant(m, n_outer_);
  // Each output element is written once: an output has the space's shape, or (a row store) the
  // reduced shape.
  const bool fits = row ? v->meta.shape == reduced_shape(shape_, dims_, true) ||
                              v->meta.shape == reduced_shape(shape_, dims_, false)
                        : v->meta.shape == shape_;
  if (!fits) {
    throw CannotLower{"output " + std::to_string(o) + " has shape " + shape_str(v->meta.shape) +
                      ", neither the group's " + shape_str(shape_) + " nor its reduced shape"};
  }
  int stage = row ? kRowStage : after_of(v);
  if (!row) loop_stages_ = std::max(loop_stages_, stage + 1);
  Store s;
  s.value = expr_of(v, m, stage);
  s.access = access_of(first_output_arg_ + int(o), v->meta.shape, m);
  s.stage = stage;
  k_.stores.push_back(s);
}

int Lowerer::add_expr(Expr e) {
  k_.exprs.push_back(std::move(e));
  return int(k_.exprs.size()) - 1;
}

void Lowerer::canonicalize(Map& m, const Shape& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      std::fill(m.rows[d].begin(), m.rows[d].end(), 0);
      m.base[d] = 0;
      if (!m.gather.empty()) m.gather[d] = 0;
    }
  }
  if (!gathers(m)) {
    m.gather.clear();
    m.gather_access = -1;
    m.gather_extent = 0;
  }
}

int Lowerer::access_of(int arg, const Shape& shape, const Map& m) {
  const Shape cs = contiguous_strides(shape);
  Access a;
  a.arg = arg;
  std::vector<int64_t> strides(space_.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    a.offset += cs[d] * m.base[d];
    for (size_t j = 0; j < space_.size(); ++j) strides[j] += cs[d] * m.rows[d][j];
  }
  a.outer_strides.assign(strides.begin(), strides.begin() + std::ptrdiff_t(n_outer_));
  a.inner_strides.assign(strides.begin() + std::ptrdiff_t(n_outer_), strides.end());
  if (gathers(m)) {
    a.index = m.gather_access;
    a.index_extent = m.gather_extent;
    for (size_t d = 0; d < shape.size(); ++d) a.index_stride += cs[d] * m.gather[d];
  }
  for (size_t i = 0; i < k_.accesses.size(); ++i) {
    const Access& b = k_.accesses[i];
    if (b.arg == a.arg && b.offset == a.offset && b.outer_strides == a.outer_strides &&
        b.inner_strides == a.inner_strides && b.index == a.index && b.index_stride == a.index_stride) {
      return int(i);
    }
  }
  k_.accesses.push_back(std::move(a));
  return int(k_.accesses.size()) - 1;
}

int Lowerer::leaf_arg(const ir::Value* v) const {
  auto it = arg_of_.find(v);
  if (it != arg_of_.end()) return it->second;
  if (v->kind == ir::ValueKind::Computed &&
      (v->producer->op == OpId::reshape || v->producer->op == OpId::contiguous)) {
    return leaf_arg(v->producer->inputs[0]);
  }
  return -1;
}

}  // namespace detail

using detail::CannotLower;
using detail::Lowerer;


int64_t split_block(int64_t n, int64_t max_block) {
  int64_t block = 1;
  while (block * 2 <= max_block && n % (block * 2) == 0) block *= 2;
  return block;
}

LowerResult lower(const ir::Graph& body, const std::string& name) { return lower(body, name, LowerOptions{}); }

LowerResult lower(const ir::Graph& body, const std::string& name, const LowerOptions& options) {
  LowerResult result;
  std::unique_ptr<ir::Graph> decomposed;
  const ir::Graph* graph = &body;
  if (has_row_ops(body)) {
    try {
      decomposed = decompose_row_ops(body);
    } catch (const Error& e) {
      // softmax over empty rows: its decomposition takes the amax of no elements, which the
      // shape rule refuses; the group then runs node by node (the eager row kernels allow it)
      result.reason = std::string("the row ops do not decompose: ") + e.what();
      return result;
    }
    graph = decomposed.get();
  }
  try {
    Lowerer lowerer(*graph, result, options);
    result.kernel = lowerer.run(name);
  } catch (const CannotLower& e) {
    result.reason = e.reason;
    result.kernel.reset();
    result.constants.clear();
  }
  return result;
}

}  // namespace smelt::codegen
