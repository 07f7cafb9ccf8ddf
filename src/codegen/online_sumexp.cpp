#include "codegen/online_sumexp.h"

#include "ops/op_util.h"

namespace smelt::codegen {
namespace {

const ir::Node* produced_by(const ir::Value* v, ops::OpId op) {
  return v->kind == ir::ValueKind::Computed && v->producer->op == op ? v->producer : nullptr;
}

}  // namespace

const ir::Value* online_sumexp_of(const ir::Node& sum, const ir::Node** amax) {
  using ops::OpId;
  if (sum.op != OpId::sum) return nullptr;
  const ir::Value* v = sum.inputs[0];
  if (const ir::Node* widen = produced_by(v, OpId::cast)) {
    if (v->meta.dtype != DType::Float64 || widen->inputs[0]->meta.dtype != DType::Float32) return nullptr;
    v = widen->inputs[0];
  }
  const ir::Node* e = produced_by(v, OpId::exp);
  const ir::Node* d = e ? produced_by(e->inputs[0], OpId::sub) : nullptr;
  const ir::Node* m = d ? produced_by(d->inputs[1], OpId::amax) : nullptr;
  if (!m || m->inputs[0] != d->inputs[0] || !m->attrs.get_int("keepdim", 0)) return nullptr;
  const ir::Value* x = d->inputs[0];
  const int64_t rank = int64_t(x->meta.shape.size());
  if ((x->meta.dtype != DType::Float32 && x->meta.dtype != DType::Float64) ||
      d->outputs[0]->meta.shape != x->meta.shape || sum.inputs[0]->meta.shape != x->meta.shape ||
      ops::reduce_dims(m->attrs, rank, "amax") != ops::reduce_dims(sum.attrs, rank, "sum")) {
    return nullptr;
  }
  *amax = m;
  return x;
}

}  // namespace smelt::codegen
