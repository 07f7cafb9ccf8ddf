#include "ops/op_table.h"

#include <string>

namespace smelt::ops {

#define SMELT_OP(name, kind, arity, flags) extern const OpImpl kOpImpl_##name;
#include "ops/ops.def"
#undef SMELT_OP

namespace {

constexpr OpInfo kOpInfos[] = {
#define SMELT_OP(name, kind, arity, flags) {#name, OpKind::kind, arity, flags},
#include "ops/ops.def"
#undef SMELT_OP
};
static_assert(sizeof(kOpInfos) / sizeof(kOpInfos[0]) == kOpCount, "ops.def and the table disagree");

// A missing implementation of any row is a link error, so the table cannot silently shrink.
const OpImpl* const kOpImpls[] = {
#define SMELT_OP(name, kind, arity, flags) &kOpImpl_##name,
#include "ops/ops.def"
#undef SMELT_OP
};
static_assert(sizeof(kOpImpls) / sizeof(kOpImpls[0]) == kOpCount);

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Elementwise: return "Elementwise";
    case OpKind::Broadcast: return "Broadcast";
    case OpKind::Injective: return "Injective";
    case OpKind::Reduce: return "Reduce";
    case OpKind::Contraction: return "Contraction";
    case OpKind::Opaque: return "Opaque";
  }
  return "?";
}

const OpInfo& op_info(OpId op) { return kOpInfos[static_cast<int>(op)]; }
const char* op_name(OpId op) { return op_info(op).name; }
const OpImpl& op_impl(OpId op) { return *kOpImpls[static_cast<int>(op)]; }

bool op_from_name(const std::string& name, OpId* out) {
  for (int i = 0; i < kOpCount; ++i) {
    if (name == kOpInfos[i].name) { *out = static_cast<OpId>(i); return true; }
  }
  return false;
}

}  // namespace smelt::ops
