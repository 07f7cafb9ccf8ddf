// Registers fuse() as the pass `fuse`, so pipelines (`smelt opt --passes`, the fuzzer's
// `--passes`, tests/passes/*.ir) can run it. passes/ sits above fusion/ in the layer order and
// must not include it, so fusion adds itself to the registry when the library loads.
#include "fusion/fuse.h"
#include "passes/pass_manager.h"

namespace smelt::fusion {
namespace {

// Changed the graph when it made a group (or erased an original that every reader recomputes:
// that only happens together with a group).
bool fuse_pass(ir::Graph& graph) { return !fuse(graph).groups.empty(); }

const bool kRegistered = [] {
  passes::register_pass({"fuse", "fusion groups: pointwise, reduction, row and contraction kernels (fusion/fuse.h)",
                         fuse_pass});
  return true;
}();

}  // namespace
}  // namespace smelt::fusion
