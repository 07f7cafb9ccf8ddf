#include "codegen/lower.h"

#include <algorithm>
#include <map>

#include "codegen/decompose.h"
#include "codegen/lower_space.h"
#include "codegen/online_sumexp.h"
#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt::codegen {
namespace {

using ops::OpId;
using ops::reduced_shape;

using detail::CannotLower;
using detail::Map;

bool is_reduce(OpId op) {
  return op == OpId::sum || op == OpId::mean || op == OpId::amax || op == OpId::amin;
}

bool gathers(const Map& m) {
  return std::any_of(m.gather.begin(), m.gather.end(), [](int64_t g) { return g != 0; });
}

bool inner_invariant(const Map& m, size_t n_outer) {
  for (const auto& row : m.rows) {
    for (size_t j = n_outer; j < row.size(); ++j) {
      if (row[j] != 0) return false;
    }
  }
  return true;
}

class Lowerer {
 public:
  Lowerer(const ir::Graph& body, LowerResult& result, const LowerOptions& options = {})
      : body_(body), result_(result), options_(options) {}

  LoopKernel run(const std::string& name) {
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
      detail::simplify_space(k_, space_, n_outer_, !reductions_.empty(), !options_.batch_generic);
    }
    return std::move(k_);
  }

 private:
  static constexpr int kRowStage = 1 << 20;

  // The iteration space: without reductions the shape of the outputs; with them the reduced
  // input's shape, reduced dims moved inner. space_dim_[j] is the dim of that shape at position j.
  void find_space() {
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

  std::vector<int64_t> reduce_dims_of(const ir::Node& n) const {
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

  void bind_args() {
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

  // stage_of_[reduce node]: the loop stage folding it, one after the last reduction it reads; an
  // online sum of exponentials folds in the stage of the maximum it subtracts.
  void assign_stages() {
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

  // x of an online sum of exponentials (codegen/online_sumexp.h), its amax in online_max_.
  const ir::Value* online_sumexp_source(const ir::Node& n) {
    const ir::Node* m = nullptr;
    const ir::Value* x = online_sumexp_of(n, &m);
    if (!x || !stage_of_.count(m)) return nullptr;
    online_max_[&n] = m;
    return x;
  }
  int after_of(const ir::Value* v) const {
    auto it = after_.find(v);
    return it == after_.end() ? 0 : it->second;
  }

  // The map that reads a value of `shape` at the current iteration point: the row's position for
  // the reduced shape without kept dims, the identity for the space's own shape, broadcasting for
  // shapes that broadcast to it. The reduced shape is tested first: over [4, 4] reduced along dim
  // 1, a value of shape [4] is a row's result (indexed by dim 0), although [4] also broadcasts
  // along dim 1; read that way, a group returning the row sums was refused.
  Map natural_map(const Shape& shape) const {
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

  void store_output(size_t o) {
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

  int add_expr(Expr e) {
    k_.exprs.push_back(std::move(e));
    return int(k_.exprs.size()) - 1;
  }

  // Zeroes the rows of size-1 dims (their index is always 0), so equal reads share one key.
  static void canonicalize(Map& m, const Shape& shape) {
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

  int access_of(int arg, const Shape& shape, const Map& m) {
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

  // The argument a value reads when it is an argument or reshapes/copies one (arguments are
  // contiguous, so a reshape of one is the same memory seen with another shape).
  int leaf_arg(const ir::Value* v) const {
    auto it = arg_of_.find(v);
    if (it != arg_of_.end()) return it->second;
    if (v->kind == ir::ValueKind::Computed &&
        (v->producer->op == OpId::reshape || v->producer->op == OpId::contiguous)) {
      return leaf_arg(v->producer->inputs[0]);
    }
    return -1;
  }

  int expr_of(const ir::Value* v, Map m, int stage) {
    canonicalize(m, v->meta.shape);
    std::vector<int64_t> key{int64_t(v->id), int64_t(stage)};
    for (size_t d = 0; d < m.rows.size(); ++d) {
      key.push_back(m.base[d]);
      key.insert(key.end(), m.rows[d].begin(), m.rows[d].end());
    }
    key.insert(key.end(), m.gather.begin(), m.gather.end());
    key.push_back(m.gather_access);
    auto memo = memo_.find(key);
    if (memo != memo_.end()) return memo->second;
    const int e = build(v, m, stage);
    memo_[key] = e;
    return e;
  }

  int build(const ir::Value* v, const Map& m, int stage) {
    if (v->kind == ir::ValueKind::Constant && v->constant.numel() == 1) {
      Expr e;
      e.kind = ExprKind::Constant;
      e.dtype = v->meta.dtype;
      e.stage = stage;
      const double x = v->constant.to_vector()[0];
      if (dtype_is_floating(e.dtype)) {
        e.fvalue = x;
      } else {
        e.ivalue = v->meta.dtype == DType::Int64 ? v->constant.contiguous().data<int64_t>()[0] : int64_t(x);
      }
      return add_expr(e);
    }
    const int arg = leaf_arg(v);
    if (gathers(m) && stage != kRowStage) throw CannotLower{"a gathered read outside the row expressions"};
    if (arg >= 0 && stage == kRowStage) {
      // A row epilogue reading an argument of the reduced shape (sum(x) + b[row], mean's count):
      // one element per row, a load whose inner strides are 0 (loop_kernel.h).
      const int access = access_of(arg, v->meta.shape, m);
      for (int64_t s : k_.accesses[size_t(access)].inner_strides) {
        if (s != 0) {
          throw CannotLower{"a row epilogue reads an argument of shape " + shape_str(v->meta.shape) +
                            " that varies within the row"};
        }
      }
      Expr e;
      e.kind = ExprKind::Load;
      e.dtype = v->meta.dtype;
      e.stage = stage;
      e.access = access;
      return add_expr(e);
    }
    if (arg >= 0) {
      Expr e;
      e.kind = ExprKind::Load;
      e.dtype = v->meta.dtype;
      e.stage = stage;
      e.access = access_of(arg, v->meta.shape, m);
      return add_expr(e);
    }
    const ir::Node* n = v->producer;
    if (is_reduce(n->op)) return reduction_result(v, m, stage);
    if (n->op == OpId::nll_loss) {
      if (stage != kRowStage || n->attrs.get_int("reduction") != 0) {
        throw CannotLower{"nll_loss's loss read inside the group"};
      }
      return nll_row_loss(*n);
    }
    if (auto call = ops::elementwise_scalar_call(n->op, n->attrs, n->inputs.back()->meta.dtype)) {
      Expr e;
      e.kind = ExprKind::Call;
      e.dtype = v->meta.dtype;
      e.stage = stage;
      e.call = *call;
      for (const ir::Value* in : n->inputs) {
        e.operands.push_back(expr_of(in, broadcast_map(m, v->meta.shape, in->meta.shape), stage));
      }
      return add_expr(e);
    }
    return expr_of(n->inputs[0], view_input_map(*n, m), stage);
  }

  // The map of an operand of shape `from` broadcast to `to` (right-aligned, size-1 dims repeat).
  static Map broadcast_map(const Map& m, const Shape& to, const Shape& from) {
    const size_t k = from.size(), offset = to.size() - k;
    Map out{std::vector<std::vector<int64_t>>(k), std::vector<int64_t>(k, 0), {}};
    const size_t r = m.rows.empty() ? 0 : m.rows[0].size();
    for (size_t e = 0; e < k; ++e) {
      const bool repeated = from[e] == 1 && to[offset + e] != 1;
      out.rows[e] = repeated ? std::vector<int64_t>(r, 0) : m.rows[offset + e];
      out.base[e] = repeated ? 0 : m.base[offset + e];
      if (!m.gather.empty()) out.gather.push_back(repeated ? 0 : m.gather[offset + e]);
    }
    out.gather_access = m.gather_access;
    out.gather_extent = m.gather_extent;
    return out;
  }

  // The map of a view op's input, given the map of its output.
  Map view_input_map(const ir::Node& n, const Map& m) const {
    const Shape& in = n.inputs[0]->meta.shape;
    const Shape& out = n.outputs[0]->meta.shape;
    switch (n.op) {
      case OpId::contiguous:
        return m;
      case OpId::expand:
        return broadcast_map(m, out, in);
      case OpId::permute: {
        Map r = m;
        const auto& dims = n.attrs.get_ints("dims");
        for (size_t d = 0; d < dims.size(); ++d) {
          const size_t w = size_t(wrap_dim(dims[d], int64_t(in.size()), "permute"));
          r.rows[w] = m.rows[d];
          r.base[w] = m.base[d];
          if (!m.gather.empty()) r.gather[w] = m.gather[d];
        }
        return r;
      }
      case OpId::slice: {
        Map r = m;
        const size_t dim = size_t(wrap_dim(n.attrs.get_int("dim"), int64_t(in.size()), "slice"));
        const int64_t start = n.attrs.get_int("start"), step = n.attrs.get_int("step");
        for (int64_t& c : r.rows[dim]) c *= step;
        r.base[dim] = start + step * m.base[dim];
        if (!m.gather.empty()) r.gather[dim] *= step;
        return r;
      }
      case OpId::reshape:
        if (gathers(m)) throw CannotLower{"a gathered read through a reshape"};
        return detail::reshape_input_map(in, out, m, space_.size());
      default:
        throw CannotLower{std::string("no lowering for op ") + n.name()};
    }
  }

  // A reduce node's value read back in a later stage: its reduction (created once) and the row's
  // result, divided by the count for mean.
  int reduction_result(const ir::Value* v, const Map& m, int stage) {
    const ir::Node* n = v->producer;
    Map natural = natural_map(v->meta.shape);
    canonicalize(natural, v->meta.shape);
    if (natural.rows != m.rows || natural.base != m.base || gathers(m)) {
      throw CannotLower{std::string(n->name()) + "'s result is read at another row than its own"};
    }
    auto found = reduction_index_.find(n);
    int index;
    if (found != reduction_index_.end()) {
      index = found->second;
    } else {
      Reduction red;
      red.op = n->op == OpId::amax ? ReduceOp::Max : n->op == OpId::amin ? ReduceOp::Min : ReduceOp::Sum;
      red.stage = stage_of_.at(n);
      red.dtype = n->inputs[0]->meta.dtype;
      auto online = online_source_.find(n);
      if (online != online_source_.end()) {
        red.op = ReduceOp::SumExp;
        red.dtype = DType::Float64;
        red.value = expr_of(online->second, natural_map(online->second->meta.shape), red.stage);
      } else {
        red.value = expr_of(n->inputs[0], natural_map(n->inputs[0]->meta.shape), red.stage);
      }
      if (red.op == ReduceOp::Sum && red.dtype == DType::Float32) {
        // float32 sums accumulate in double and round once, as the eager kernels do (RowAcc in
        // kernels/reduce_core.h): a float32 accumulator loses the small terms of a long row and
        // rounds a constant row's mean away from its value (layer_norm of a padding row).
        red.value = cast_expr(red.value, DType::Float64, red.stage);
        red.dtype = DType::Float64;
      }
      k_.reductions.push_back(red);
      index = int(k_.reductions.size()) - 1;
      reduction_index_[n] = index;
    }
    SMELT_INTERNAL_CHECK(stage > k_.reductions[size_t(index)].stage)
        << "lower: reduction read in stage " << stage << " before it completes";
    const DType acc = k_.reductions[size_t(index)].dtype;  // float64 for a widened float32 sum
    Expr e;
    e.kind = ExprKind::ReductionResult;
    e.dtype = acc;
    e.stage = stage;
    e.reduction = index;
    int result = add_expr(e);
    if (n->op == OpId::mean) {
      int64_t count = 1;
      for (int64_t d : dims_) count *= shape_[d];
      Expr c;
      c.kind = ExprKind::Constant;
      c.dtype = acc;
      c.stage = stage;
      c.fvalue = double(count);  // float64: exact up to 2^53; the eager mean divides by double(count)
      Expr div;
      div.kind = ExprKind::Call;
      div.dtype = acc;
      div.stage = stage;
      div.call = kernels::ScalarCall{kernels::ScalarFn::div};
      div.operands = {result, add_expr(c)};
      result = add_expr(div);
    }
    return acc == v->meta.dtype ? result : cast_expr(result, v->meta.dtype, stage);
  }

  // nll_loss over log-probabilities (N, C) that the group computes, its class dim the reduced one:
  // per row, the loss where(target == ignore, 0, -logp[n, target[n]]) — logp's expression
  // evaluated at the one column the target picks (a gather, codegen/loop_kernel.h) — as a row
  // expression; the targets checked before the kernel runs as the eager kernel checks them.
  int nll_row_loss(const ir::Node& n) {
    const ir::Value* logp = n.inputs[0];
    const ir::Value* target = n.inputs[1];
    const Shape& shape = logp->meta.shape;
    if (shape.size() != 2 || shape != shape_ || dims_ != std::vector<int64_t>{1}) {
      throw CannotLower{"nll_loss over " + shape_str(shape) + " is not over the rows of the group's " +
                        shape_str(shape_) + " reduced along dim 1"};
    }
    const int64_t ignore = n.attrs.get_int("ignore_index");
    const Map row = natural_map(target->meta.shape);
    if (target->kind == ir::ValueKind::Constant && target->constant.numel() == 1) {
      return nll_constant_target(n, row, target->constant.contiguous().data<int64_t>()[0]);
    }
    const int arg = leaf_arg(target);
    if (arg < 0) throw CannotLower{"nll_loss's target is computed inside the group"};
    const int index = access_of(arg, target->meta.shape, row);
    bool checked = false;
    for (const IndexCheck& c : k_.index_checks) checked |= c.arg == arg && c.ignore == ignore;
    if (!checked) k_.index_checks.push_back({arg, shape[1], ignore, "nll_loss"});
    const int t = expr_of(target, row, kRowStage);
    Map pick{{row.rows[0], std::vector<int64_t>(space_.size(), 0)}, {row.base[0], 0}, {0, 1}, index, shape[1]};
    const int picked = expr_of(logp, pick, kRowStage);
    const DType dtype = logp->meta.dtype;
    const int neg = call_expr(OpId::neg, {picked}, dtype);
    const int zero = constant_expr(dtype, 0.0, 0);
    return call_expr(OpId::where, {compare_target(OpId::eq, t, ignore), zero, neg}, dtype);
  }

  // nll_loss of one row whose target is a literal (a body constant): no gather, and no check
  // before the kernel (a target out of range is refused here: node by node, the eager kernel
  // reports it when the group runs).
  int nll_constant_target(const ir::Node& n, const Map& row, int64_t t) {
    const ir::Value* logp = n.inputs[0];
    const DType dtype = logp->meta.dtype;
    if (t == n.attrs.get_int("ignore_index")) return constant_expr(dtype, 0.0, 0);
    if (t < 0 || t >= logp->meta.shape[1]) {
      throw CannotLower{"nll_loss's constant target " + std::to_string(t) + " is out of range"};
    }
    Map pick{{row.rows[0], std::vector<int64_t>(space_.size(), 0)}, {row.base[0], t}, {}, -1, 0};
    return call_expr(OpId::neg, {expr_of(logp, pick, kRowStage)}, dtype);
  }

  // eq / ne of the row's target and ignore_index (a Bool row expression).
  int compare_target(OpId op, int t, int64_t ignore) {
    return call_expr(op, {t, constant_expr(DType::Int64, 0.0, ignore)}, DType::Bool);
  }

  // nll_loss's sum or mean over the rows: a fold of the row losses (and for mean of whether each
  // row counts) in double, in row order, as the eager kernel sums (LoopKernel::folds).
  void fold_nll_loss(const ir::Node& n, int arg) {
    RowFold f;
    f.value = cast_expr(nll_row_loss(n), DType::Float64, kRowStage);
    if (n.attrs.get_int("reduction") == 1) {
      const int t = expr_of(n.inputs[1], natural_map(n.inputs[1]->meta.shape), kRowStage);
      const int counted = compare_target(OpId::ne, t, n.attrs.get_int("ignore_index"));
      f.count = cast_expr(counted, DType::Float64, kRowStage);
    }
    f.access = access_of(arg, Shape{}, Map{});
    k_.folds.push_back(f);
  }

  int call_expr(OpId op, std::vector<int> operands, DType dtype) {
    Expr e;
    e.kind = ExprKind::Call;
    e.dtype = dtype;
    e.stage = kRowStage;
    e.call = *ops::elementwise_scalar_call(op, ops::Attrs{}, k_.exprs[size_t(operands.back())].dtype);
    e.operands = std::move(operands);
    return add_expr(e);
  }

  int constant_expr(DType dtype, double f, int64_t i) {
    Expr e;
    e.kind = ExprKind::Constant;
    e.dtype = dtype;
    e.stage = kRowStage;
    e.fvalue = f;
    e.ivalue = i;
    return add_expr(e);
  }

  // `operand` converted to `dtype` by the cast op's scalar function.
  int cast_expr(int operand, DType dtype, int stage) {
    Expr e;
    e.kind = ExprKind::Call;
    e.dtype = dtype;
    e.stage = stage;
    e.call = *ops::elementwise_scalar_call(OpId::cast, ops::Attrs{{"dtype", dtype}}, k_.exprs[size_t(operand)].dtype);
    e.operands = {operand};
    return add_expr(e);
  }

  const ir::Graph& body_;
  LowerResult& result_;
  LowerOptions options_;
  LoopKernel k_;
  Shape shape_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> space_;
  std::vector<int64_t> space_dim_;
  size_t n_outer_ = 0;
  int loop_stages_ = 1;
  int first_output_arg_ = 0;
  std::vector<const ir::Node*> reductions_;
  std::map<const ir::Value*, int> arg_of_;
  std::map<const ir::Value*, int> after_;
  std::map<const ir::Node*, int> stage_of_;
  std::map<const ir::Node*, int> reduction_index_;
  std::map<const ir::Node*, const ir::Value*> online_source_;  // SumExp sum node -> x
  std::map<const ir::Node*, const ir::Node*> online_max_;      // SumExp sum node -> its amax
  std::map<std::vector<int64_t>, int> memo_;
};

}  // namespace

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
