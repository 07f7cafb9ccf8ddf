// The `group` row of the op table: a node that holds a subgraph (a fusion group). Its outputs and
// its computation are its body's (see ir/graph.h): the op table knows nothing of IR graphs
// (ops/ never includes ir/), so the shape rule and kernel here only refuse to run without a body.
// The IR builds group nodes with Graph::add_group and the interpreter runs their bodies.
#include "ops/op_table.h"

namespace smelt::ops {
namespace {

std::vector<TensorMeta> group_shape(const std::vector<TensorMeta>&, const Attrs&) {
  SMELT_CHECK(false) << "group: a group node's outputs come from its body graph; build it with "
                        "ir::Graph::add_group (in text IR: `= group(%a, ...) { graph(...) {...} }`)";
  return {};
}

void group_kernel(const std::vector<Tensor>&, const Attrs&, const std::vector<Tensor>&) {
  SMELT_CHECK(false) << "group: a group node runs its body graph (trace::interpret), not a kernel";
}

}  // namespace

SMELT_OP_IMPL(group) = {group_shape, group_kernel, nullptr, kSaveNothing};

}  // namespace smelt::ops
