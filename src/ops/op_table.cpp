#include "ops/op_table.h"

#include <string>

#include "ops/custom_ops.h"

namespace smelt::ops {

#define SMELT_OP(name, kind, arity, outputs, flags, views, writes) extern const OpImpl kOpImpl_##name;
#include "ops/ops.def"
#undef SMELT_OP

namespace {

constexpr OpInfo kOpInfos[] = {
#define SMELT_OP(name, kind, arity, outputs, flags, views, writes) \
  {#name, OpKind::kind, arity, outputs, flags, views, writes},
#include "ops/ops.def"
#undef SMELT_OP
};
static_assert(sizeof(kOpInfos) / sizeof(kOpInfos[0]) == kOpCount, "ops.def and the table disagree");

// Each row's memory columns name real inputs and outputs.
constexpr bool memory_columns_valid(const OpInfo& info) {
  if (info.num_outputs == 0 || info.num_outputs < -1) return false;
  for (int k = 0; k < kMaxViewOutputs; ++k) {
    const int in = int((info.views >> (4 * k)) & 15u) - 1;
    const bool no_such_output = info.num_outputs >= 0 && k >= info.num_outputs;
    if (in >= 0 && (no_such_output || (info.arity >= 0 && in >= info.arity))) return false;
  }
  return info.arity < 0 ? info.writes == 0 : (info.writes >> info.arity) == 0;
}
constexpr bool all_rows_valid() {
  for (const OpInfo& info : kOpInfos) {
    if (!memory_columns_valid(info)) return false;
  }
  return true;
}
static_assert(all_rows_valid(), "an ops.def row names an output or input the op does not have");

// A missing implementation of any row is a link error, so the table cannot silently shrink.
const OpImpl* const kOpImpls[] = {
#define SMELT_OP(name, kind, arity, outputs, flags, views, writes) &kOpImpl_##name,
#include "ops/ops.def"
#undef SMELT_OP
};
static_assert(sizeof(kOpImpls) / sizeof(kOpImpls[0]) == kOpCount);

}  // namespace

// Ids past the table's rows are registered ops (ops/custom_ops.h).
static const CustomOpRecord& registered(OpId op) {
  const CustomOpRecord* record = custom_op(op);
  SMELT_INTERNAL_CHECK(record) << "op id " << int(op) << " is neither built in nor registered";
  return *record;
}

const OpInfo& op_info(OpId op) {
  if (int(op) < kOpCount) return kOpInfos[static_cast<int>(op)];
  return registered(op).info;
}
const char* op_name(OpId op) { return op_info(op).name; }
const OpImpl& op_impl(OpId op) {
  if (int(op) < kOpCount) return *kOpImpls[static_cast<int>(op)];
  return registered(op).impl;
}

int aliases(OpId op, int out) {
  const OpInfo& info = op_info(op);
  if (out < 0 || out >= info.num_outputs) return -1;
  return int((info.views >> (4 * out)) & 15u) - 1;
}

bool mutates(OpId op, int in) { return in >= 0 && in < 32 && ((op_info(op).writes >> in) & 1u); }
bool mutates_any(OpId op) { return op_info(op).writes != 0; }
bool is_pure(OpId op) { return !mutates_any(op) && !(op_info(op).flags & kRandom); }
bool may_refuse_values(OpId op, const std::vector<TensorMeta>& in) {
  if (!(op_info(op).flags & kRefusesValues)) return false;
  // (IEEE: a float x / 0 is inf or NaN; an unsigned or bool divisor of 0 gives 0, as in the kernel)
  if (op == OpId::div) return in.size() == 2 && dtype_is_signed_integer(in[1].dtype);
  return true;
}
bool is_view_op(OpId op) { return op_info(op).views != 0; }
// A registered op without a backward is differentiable too: its gradient rule is the error that
// says so, raised only when a gradient flows.
bool is_differentiable(OpId op) { return custom_op(op) || op_impl(op).grad != nullptr; }

bool op_from_name(const std::string& name, OpId* out) {
  for (int i = 0; i < kOpCount; ++i) {
    if (name == kOpInfos[i].name) { *out = static_cast<OpId>(i); return true; }
  }
  return custom_op_from_name(name, out);
}

}  // namespace smelt::ops
