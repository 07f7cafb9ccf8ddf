// Values the plan hands over as strided views instead of copying them (Slot::permute,
// Slot::strided_view): a transpose read only as a matmul operand, and view chains (slice, reshape,
// permute) of computed values whose every reader takes strided operands — attention's split of a
// projection into queries, keys, values and heads.
#include <map>

#include "ops/op_util.h"
#include "runtime/plan_impl.h"

namespace smelt::runtime {

// Whether `node` is a permute whose output only ever reaches a matmul as one of its two operands:
// directly, or as an input of a contraction group that its first node (the matmul) alone reads.
// Such a value can stay a strided view of its input (Slot::permute). Never for graph outputs.
bool Plan::Impl::strided_operand_only(const ir::Node& node, const std::map<const ir::Value*, int>& output_index) const {
  if (node.op != ops::OpId::permute || output_index.count(node.outputs[0])) return false;
  const ir::Value* v = node.outputs[0];
  if (v->uses.empty()) return false;
  for (const ir::Use& u : v->uses) {
    const ir::Node& user = *u.node;
    if (user.op == ops::OpId::matmul && !user.is_group()) continue;
    if (!user.is_group() || !user.attrs.has("fusion") || user.attrs.get_string("fusion") != "contraction") return false;
    const ir::Graph& body = *user.body;
    if (body.nodes().empty() || body.nodes().front()->op != ops::OpId::matmul) return false;
    const ir::Value* inner = body.inputs()[size_t(u.index)];
    for (const ir::Use& iu : inner->uses) {
      if (iu.node != body.nodes().front().get()) return false;
    }
  }
  return true;
}

// The strides `slot` has when bound, for the views of arena memory strided_view makes (a slot's
// offset does not matter to them).
Shape Plan::Impl::slot_strides(int slot) const {
  const Slot& s = slots[size_t(slot)];
  if (s.kind != SlotKind::Alias || (!s.strided_view && s.permute.empty())) return contiguous_strides(s.meta.shape);
  const Shape base = slot_strides(s.index);
  Shape out;
  if (!s.permute.empty() || s.view_op == ops::OpId::permute) {
    const int64_t rank = int64_t(base.size());  // dims may count from the end
    for (int64_t d : s.permute.empty() ? s.view_attrs.get_ints("dims") : s.permute) {
      out.push_back(base[size_t(wrap_dim(d, rank, "plan: permute"))]);
    }
  } else if (s.view_op == ops::OpId::slice) {
    out = base;
    out[size_t(s.view_attrs.get_int("dim"))] *= s.view_attrs.get_int("step");
  } else {
    SMELT_INTERNAL_CHECK(ops::view_strides(slots[size_t(s.index)].meta.shape, base, s.meta.shape, &out))
        << "plan: a reshape alias without view strides";
  }
  return out;
}

namespace {
// The strides of `node`'s output (a slice, permute or reshape) over an input with `in_strides`;
// false when a reshape cannot be a view of that layout, or for other ops.
bool view_output_strides(const ir::Node& node, const Shape& in_strides, Shape* out) {
  const Shape& in_shape = node.inputs[0]->meta.shape;
  if (node.op == ops::OpId::slice) {
    *out = in_strides;
    const int64_t dim = node.attrs.get_int("dim");
    if (dim < 0 || dim >= int64_t(in_strides.size())) return false;
    (*out)[size_t(dim)] *= node.attrs.get_int("step");
    return true;
  }
  if (node.op == ops::OpId::permute) {  // dims may count from the end
    out->clear();
    const int64_t rank = int64_t(in_strides.size());
    for (int64_t d : node.attrs.get_ints("dims")) {
      if (d < -rank || d >= rank) return false;
      out->push_back(in_strides[size_t(d < 0 ? d + rank : d)]);
    }
    return true;
  }
  return node.op == ops::OpId::reshape && ops::view_strides(in_shape, in_strides, node.outputs[0]->meta.shape, out);
}
}  // namespace

// Whether every reader of `v` (laid out with `strides`) takes a strided operand: a matmul (its
// GEMM takes any strides) as an op step or as the product of a contraction group, an elementwise
// op run as an op step (the eager kernels walk any layout), or another such view whose readers do.
bool Plan::Impl::strided_readers(const ir::Value* v, const Shape& strides,
                                 const std::map<const ir::Value*, int>& output_index) const {
  if (v->uses.empty() || output_index.count(v)) return false;
  for (const ir::Use& u : v->uses) {
    const ir::Node& user = *u.node;
    if (user.is_group()) {
      if (!user.attrs.has("fusion") || user.attrs.get_string("fusion") != "contraction") return false;
      const ir::Graph& body = *user.body;
      if (body.nodes().empty() || body.nodes().front()->op != ops::OpId::matmul) return false;
      for (const ir::Use& iu : body.inputs()[size_t(u.index)]->uses) {
        if (iu.node != body.nodes().front().get()) return false;
      }
      continue;
    }
    if (user.op == ops::OpId::matmul || ops::op_info(user.op).kind == ops::OpKind::Elementwise) continue;
    Shape next;
    if (u.index != 0 || !view_output_strides(user, strides, &next) ||
        !strided_readers(user.outputs[0], next, output_index)) {
      return false;
    }
  }
  return true;
}

// Whether `node`, a slice, permute or reshape of arena memory (a computed value: its layout is
// known when the plan is built), stays a strided view: everything downstream of it takes strided
// operands (strided_readers), so no step copies it. A reshape of contiguous memory is left to
// the plain alias.
bool Plan::Impl::strided_view(const ir::Node& node, int in_slot, const std::map<const ir::Value*, int>& output_index) const {
  if (node.is_group() || (node.op != ops::OpId::slice && node.op != ops::OpId::permute && node.op != ops::OpId::reshape)) {
    return false;
  }
  if (slots[size_t(root(in_slot))].kind != SlotKind::Arena) return false;
  if (node.op == ops::OpId::reshape && !is_strided(in_slot)) return false;
  Shape strides;
  return view_output_strides(node, slot_strides(in_slot), &strides) &&
         strided_readers(node.outputs[0], strides, output_index);
}

}  // namespace smelt::runtime
