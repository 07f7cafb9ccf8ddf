// Values the plan hands over as strided views instead of copying them (ViewSlot): a
// transpose read only as a matmul operand, and view chains (slice, reshape, permute) of computed
// values whose every reader takes strided operands — attention's split of a projection into
// queries, keys, values and heads. Their strides come from ops::view_layout, as eager's do.
#include <map>

#include "fusion/fuse.h"
#include "ops/views.h"
#include "runtime/plan_impl.h"

namespace smelt::runtime {
namespace {

// Whether use `u` reads its value only as an operand of a matmul: a matmul op step, or a
// contraction group whose first node (its matmul) is the only reader of that input.
bool matmul_operand_use(const ir::Use& u) {
  const ir::Node& user = *u.node;
  if (!user.is_group()) return user.op == ops::OpId::matmul;
  if (fusion::group_pattern(user) != fusion::Pattern::Contraction) return false;
  const ir::Graph& body = *user.body;
  if (body.nodes().empty() || body.nodes().front()->op != ops::OpId::matmul) return false;
  for (const ir::Use& iu : body.inputs()[size_t(u.index)]->uses) {
    if (iu.node != body.nodes().front().get()) return false;
  }
  return true;
}

// The strides of `op` (a permute, slice or reshape with `attrs`) applied to an input of
// `in_shape` laid out with `in_strides`, as its view kernel makes them (ops::view_layout); false
// when a reshape cannot be a view of that layout, or for other ops.
bool view_output_strides(ops::OpId op, const ops::Attrs& attrs, const Shape& in_shape,
                         const Shape& in_strides, const Shape& out_shape, Shape* out) {
  if (op != ops::OpId::slice && op != ops::OpId::permute && op != ops::OpId::reshape) return false;
  std::optional<ops::ViewLayout> v =
      ops::view_layout(op, attrs, in_shape, in_strides, 0, out_shape);
  if (!v) return false;
  *out = std::move(v->strides);
  return true;
}

bool view_output_strides(const ir::Node& node, const Shape& in_strides, Shape* out) {
  return view_output_strides(node.op, node.attrs, node.inputs[0]->meta.shape, in_strides,
                             node.outputs[0]->meta.shape, out);
}

}  // namespace

// Whether `node` is a permute whose output only ever reaches a matmul as one of its two operands
// (of any memory, graph inputs included: a permute is a view of every layout). Never for graph
// outputs.
bool Plan::Impl::strided_operand_only(const ir::Node& node,
                                      const std::map<const ir::Value*, int>& output_index) const {
  if (node.op != ops::OpId::permute || output_index.count(node.outputs[0]) ||
      node.outputs[0]->uses.empty())
    return false;
  for (const ir::Use& u : node.outputs[0]->uses) {
    if (!matmul_operand_use(u)) return false;
  }
  return true;
}

// The alias slot of a strided view `node` of `in_slot` (its view kernel applied when binding).
int Plan::Impl::strided_alias(const ir::Node& node, int in_slot) {
  return add_slot({node.outputs[0]->meta, ViewSlot{in_slot, node.op, node.attrs}});
}

// The strides `slot` has when bound, for the views of arena memory strided_view makes (a slot's
// offset does not matter to them).
Shape Plan::Impl::slot_strides(int slot) const {
  const Slot& s = slots[size_t(slot)];
  const ViewSlot* view = s.as<ViewSlot>();
  if (!view) return contiguous_strides(s.meta.shape);
  const Slot& base = slots[size_t(view->of)];
  Shape out;
  SMELT_INTERNAL_CHECK(view_output_strides(view->op, view->attrs, base.meta.shape,
                                           slot_strides(view->of), s.meta.shape, &out))
      << "plan: a strided alias without view strides";
  return out;
}

// Whether every reader of `v` (laid out with `strides`) takes a strided operand: a matmul (its
// GEMM takes any strides) as an op step or as the product of a contraction group, an elementwise
// op run as an op step (the eager kernels walk any layout), or another such view whose readers do.
bool Plan::Impl::strided_readers(const ir::Value* v, const Shape& strides,
                                 const std::map<const ir::Value*, int>& output_index) const {
  if (v->uses.empty() || output_index.count(v)) return false;
  for (const ir::Use& u : v->uses) {
    const ir::Node& user = *u.node;
    if (matmul_operand_use(u) ||
        (!user.is_group() && ops::op_info(user.op).kind == ops::OpKind::Elementwise))
      continue;
    Shape next;
    if (user.is_group() || u.index != 0 || !view_output_strides(user, strides, &next) ||
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
bool Plan::Impl::strided_view(const ir::Node& node, int in_slot,
                              const std::map<const ir::Value*, int>& output_index) const {
  if (node.is_group() || (node.op != ops::OpId::slice && node.op != ops::OpId::permute &&
                          node.op != ops::OpId::reshape)) {
    return false;
  }
  if (!slots[size_t(root(in_slot))].as<ArenaSlot>()) return false;
  if (node.op == ops::OpId::reshape && !is_strided(in_slot)) return false;
  Shape strides;
  return view_output_strides(node, slot_strides(in_slot), &strides) &&
         strided_readers(node.outputs[0], strides, output_index);
}

// The element offset at which a slice of contiguous arena memory is itself contiguous (a step
// of a sequence, a block of leading rows, any slice whose dims before the sliced one have size 1):
// such a slice is that memory at an offset for every reader, not a copy. nullopt otherwise, and
// for graph outputs (returned in their own tensors).
std::optional<int64_t> Plan::Impl::contiguous_slice_offset(
    const ir::Node& node, int in_slot, const std::map<const ir::Value*, int>& output_index) const {
  if (node.is_group() || node.op != ops::OpId::slice || output_index.count(node.outputs[0])) {
    return std::nullopt;
  }
  const Slot& in = slots[size_t(in_slot)];
  if (!in.as<ArenaSlot>() && !in.as<AliasSlot>()) return std::nullopt;  // contiguous slots only
  if (!slots[size_t(root(in_slot))].as<ArenaSlot>()) return std::nullopt;
  const Shape& in_shape = node.inputs[0]->meta.shape;
  const Shape& out_shape = node.outputs[0]->meta.shape;
  std::optional<ops::ViewLayout> v = ops::view_layout(node.op, node.attrs, in_shape,
                                                      contiguous_strides(in_shape), 0, out_shape);
  if (!v) return std::nullopt;
  // Contiguous: each dim of size > 1 steps over exactly the elements of the dims after it.
  int64_t expect = 1;
  for (size_t d = out_shape.size(); d-- > 0;) {
    if (out_shape[d] == 1) continue;
    if (v->strides[d] != expect) return std::nullopt;
    expect *= out_shape[d];
  }
  // Any element offset: no kernel assumes its operands aligned (a caller's inputs never are), and
  // a misaligned read costs less than the copy it replaces.
  return v->offset;
}

}  // namespace smelt::runtime
