// The expression half of the Lowerer (codegen/lowerer.h): a value of the group as an expression of
// the kernel at an index map — loads, views and broadcasts as maps, reductions as folds in their
// own stage, nll_loss as a row-indexed gather and a fold over rows, casts and constants.
#include "codegen/lowerer.h"
#include "codegen/online_sumexp.h"
#include "ops/elementwise_bind.h"
#include "ops/op_util.h"
#include "ops/views.h"

namespace smelt::codegen::detail {

using ops::reduced_shape;

int Lowerer::expr_of(const ir::Value* v, Map m, int stage) {
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

int Lowerer::build(const ir::Value* v, const Map& m, int stage) {
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

Map Lowerer::broadcast_map(const Map& m, const Shape& to, const Shape& from) {
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

Map Lowerer::view_input_map(const ir::Node& n, const Map& m) const {
  const Shape& in = n.inputs[0]->meta.shape;
  const Shape& out = n.outputs[0]->meta.shape;
  if (n.op == OpId::contiguous) return m;
  if (n.op == OpId::reshape) {
    if (gathers(m)) throw CannotLower{"a gathered read through a reshape"};
    return detail::reshape_input_map(in, out, m, space_.size());
  }
  // permute, slice, expand: the view arithmetic's one owner (ops::view_layout) gives, for an input
  // laid out with stride 1 in dim w and 0 elsewhere, the output's strides and offset: how input
  // dim w's index follows from the output's (w = sum_d strides[d] * out_d + offset).
  Map r;
  r.rows.assign(in.size(), std::vector<int64_t>(space_.size(), 0));
  r.base.assign(in.size(), 0);
  if (!m.gather.empty()) r.gather.assign(in.size(), 0);
  r.gather_access = m.gather_access;
  r.gather_extent = m.gather_extent;
  for (size_t w = 0; w < in.size(); ++w) {
    Shape unit(in.size(), 0);
    unit[w] = 1;
    const std::optional<ops::ViewLayout> layout = ops::view_layout(n.op, n.attrs, in, unit, 0, out);
    if (!layout) throw CannotLower{std::string("no lowering for op ") + n.name()};
    r.base[w] = layout->offset;
    for (size_t d = 0; d < out.size(); ++d) {
      const int64_t c = layout->strides[d];
      if (c == 0) continue;
      for (size_t j = 0; j < r.rows[w].size(); ++j) r.rows[w][j] += c * m.rows[d][j];
      r.base[w] += c * m.base[d];
      if (!m.gather.empty()) r.gather[w] += c * m.gather[d];
    }
  }
  return r;
}

int Lowerer::reduction_result(const ir::Value* v, const Map& m, int stage) {
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

int Lowerer::nll_row_loss(const ir::Node& n) {
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

int Lowerer::nll_constant_target(const ir::Node& n, const Map& row, int64_t t) {
  const ir::Value* logp = n.inputs[0];
  const DType dtype = logp->meta.dtype;
  if (t == n.attrs.get_int("ignore_index")) return constant_expr(dtype, 0.0, 0);
  if (t < 0 || t >= logp->meta.shape[1]) {
    throw CannotLower{"nll_loss's constant target " + std::to_string(t) + " is out of range"};
  }
  Map pick{{row.rows[0], std::vector<int64_t>(space_.size(), 0)}, {row.base[0], t}, {}, -1, 0};
  return call_expr(OpId::neg, {expr_of(logp, pick, kRowStage)}, dtype);
}

int Lowerer::compare_target(OpId op, int t, int64_t ignore) {
  return call_expr(op, {t, constant_expr(DType::Int64, 0.0, ignore)}, DType::Bool);
}

void Lowerer::fold_nll_loss(const ir::Node& n, int arg) {
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

int Lowerer::call_expr(OpId op, std::vector<int> operands, DType dtype) {
  Expr e;
  e.kind = ExprKind::Call;
  e.dtype = dtype;
  e.stage = kRowStage;
  e.call = *ops::elementwise_scalar_call(op, ops::Attrs{}, k_.exprs[size_t(operands.back())].dtype);
  e.operands = std::move(operands);
  return add_expr(e);
}

int Lowerer::constant_expr(DType dtype, double f, int64_t i) {
  Expr e;
  e.kind = ExprKind::Constant;
  e.dtype = dtype;
  e.stage = kRowStage;
  e.fvalue = f;
  e.ivalue = i;
  return add_expr(e);
}

int Lowerer::cast_expr(int operand, DType dtype, int stage) {
  Expr e;
  e.kind = ExprKind::Call;
  e.dtype = dtype;
  e.stage = stage;
  e.call = *ops::elementwise_scalar_call(OpId::cast, ops::Attrs{{"dtype", dtype}}, k_.exprs[size_t(operand)].dtype);
  e.operands = {operand};
  return add_expr(e);
}

}  // namespace smelt::codegen::detail
