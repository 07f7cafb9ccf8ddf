// FusionReport's text: what `smelt opt --fuse --explain-fusion` prints.
#include <cstdio>
#include <sstream>

#include "fusion/fuse.h"

namespace smelt::fusion {

std::string FusionReport::summary() const {
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f%%", 100.0 * fusion_rate());
  std::ostringstream os;
  os << "fusion rate " << fused_ops << "/" << fusable_ops << " fusable ops (" << rate << "), kernels "
     << kernels_before << " -> " << kernels_after << ", " << bytes_not_written
     << " intermediate bytes not written, " << recomputed_ops << " ops recomputed, " << groups.size()
     << " groups";
  if (unlowered_groups > 0) os << " (" << unlowered_groups << " planned groups left unfused: they would not lower)";
  return os.str();
}

std::string FusionReport::explain() const {
  std::ostringstream os;
  os << "fusion groups (" << groups.size() << "):\n";
  for (const FusionGroupInfo& g : groups) {
    os << "  #" << g.id << " " << pattern_name(g.pattern) << ":";
    for (size_t i = 0; i < g.ops.size(); ++i) os << (i ? ", " : " ") << g.ops[i];
    if (!g.recomputed.empty()) {
      os << "; recomputed:";
      for (size_t i = 0; i < g.recomputed.size(); ++i) os << (i ? ", " : " ") << g.recomputed[i];
    }
    os << " (" << g.outputs << (g.outputs == 1 ? " output)\n" : " outputs)\n");
  }
  os << "unfused nodes (" << unfused.size() << "):\n";
  for (const UnfusedNode& u : unfused) os << "  " << u.node << ": " << u.reason << "\n";
  os << summary() << "\n";
  return os.str();
}

}  // namespace smelt::fusion
