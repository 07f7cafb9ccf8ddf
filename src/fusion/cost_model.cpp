#include "fusion/cost_model.h"

#include <algorithm>
#include <unordered_set>

#include "fusion/pattern.h"
#include "ir/printer.h"
#include "ops/op_util.h"

namespace smelt::fusion::detail {
namespace {

// Broadcast epilogues: at least this many rows, or rows short enough to run serially.
constexpr int64_t kMinRowsForBroadcastEpilogue = 16;
constexpr int64_t kMaxSerialRowElements = int64_t(1) << 16;

}  // namespace

CostModel::CostModel(const ir::Graph& graph, const ir::Graph* cost) {
  if (!cost) return;
  SMELT_CHECK(graph.inputs().size() == cost->inputs().size() && graph.constants().size() == cost->constants().size() &&
              graph.num_nodes() == cost->num_nodes())
      << "fuse: the cost-model graph (" << cost->num_nodes() << " nodes) is not the fused graph's structure ("
      << graph.num_nodes() << " nodes); valid: the same graph at another batch size";
  auto pair = [&](const ir::Value* v, const ir::Value* c) {
    SMELT_CHECK(v->meta.dtype == c->meta.dtype && v->meta.shape.size() == c->meta.shape.size())
        << "fuse: value " << ir::value_ref(v) << " differs from its cost-model counterpart " << ir::value_ref(c)
        << " beyond its dims";
    cost_bytes_[v] = c->meta.nbytes();
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) pair(graph.inputs()[i], cost->inputs()[i]);
  for (size_t i = 0; i < graph.constants().size(); ++i) pair(graph.constants()[i], cost->constants()[i]);
  for (auto n = graph.nodes().begin(), c = cost->nodes().begin(); n != graph.nodes().end(); ++n, ++c) {
    SMELT_CHECK((*n)->op == (*c)->op && (*n)->outputs.size() == (*c)->outputs.size())
        << "fuse: node " << ir::node_ref(**n) << " differs from its cost-model counterpart " << ir::node_ref(**c);
    for (size_t o = 0; o < (*n)->outputs.size(); ++o) pair((*n)->outputs[o], (*c)->outputs[o]);
  }
}

int64_t CostModel::bytes(const ir::Value* v) const {
  if (cost_bytes_.empty()) return v->meta.nbytes();
  auto it = cost_bytes_.find(v);
  SMELT_INTERNAL_CHECK(it != cost_bytes_.end()) << "fuse: value " << ir::value_ref(v) << " has no cost-model size";
  return it->second;
}

bool CostModel::recompute_pays(const ir::Node& n, bool must_store, int64_t readers, std::string* why) const {
  const ir::Value* v = n.outputs[0];
  int64_t in = 0;
  std::unordered_set<const ir::Value*> seen;
  for (const ir::Value* w : n.inputs) {
    if (!seen.insert(w).second) continue;
    int64_t w_bytes = bytes(w);
    // a view reads its source (an expanded bias is read at its own size)
    for (const ir::Value* s = w; s->producer && is_view(*s->producer);) {
      s = s->producer->inputs[0];
      w_bytes = std::min(w_bytes, bytes(s));
    }
    if (w->kind == ir::ValueKind::Constant && w->constant.numel() <= 1) w_bytes = 0;  // an immediate
    in += w_bytes;
  }
  const int64_t k = readers, bv = bytes(v);
  const bool pays = must_store ? in <= bv : k * in <= (k + 1) * bv;
  if (!pays) {
    *why = "cost model: " + ir::value_ref(v) + " is read outside the group; materialized once (" +
           std::to_string(bv) + " bytes) since recomputing reads " + std::to_string(in) + " bytes of operands" +
           (must_store ? " and it must be stored anyway" : " per reader (" + std::to_string(k) + " readers)");
  }
  return pays;
}

bool CostModel::broadcast_epilogue_pays(const ir::Node& reduce, std::string* why) const {
  // bytes(): with cost_shapes, the sizes of the batch every batch size is fused at
  const int64_t size = int64_t(dtype_size(reduce.inputs[0]->meta.dtype));
  const int64_t elements = bytes(reduce.inputs[0]) / size, rows = bytes(reduce.outputs[0]) / size;
  if (rows >= kMinRowsForBroadcastEpilogue || elements <= kMaxSerialRowElements) return true;
  *why = "; cost model: a broadcast epilogue over " + std::to_string(rows) + " row(s) of " +
         std::to_string(elements) + " elements would run serially (a row kernel is parallel over its rows; "
         "fewer than " + std::to_string(kMinRowsForBroadcastEpilogue) + " rows above " +
         std::to_string(kMaxSerialRowElements) + " elements run the epilogue as a parallel pointwise kernel)";
  return false;
}

// The eager elementwise loop (kernels/loop_core.h StridedLoop) merges trailing dims while every
// operand is contiguous across them and calls its inner loop once per merged run; a broadcast
// operand ends the run where it switches between broadcast and read. Measured (2 threads,
// `smelt::compile` with the cpp backend against the eager op, best of 200 calls), runs of 16 or 32:
//   x (1, 6, 56, 56, 16) * s (1, 6, 1, 1, 16), a squeeze-excitation scale on blocked channels:
//     eager 185 us, generated 31 us; float64 163 / 94 us; (2, 4, 28, 28, 16): 44 / 9 us;
//   x (4096, 32) + b (32): 27 / 10 us;
// and a long run, x (1, 96, 56, 56) * s (1, 96, 1, 1) (runs of 3136): eager 22 us, generated 25 us.
constexpr int64_t kShortBroadcastRun = 64;
constexpr int64_t kMinLonePointwiseElements = 4096;

namespace {

// The length of the eager loop's innermost run over `out`, operands assumed contiguous: trailing
// dims (size-1 ones skipped) while each operand stays broadcast, or stays read, as in the last one.
int64_t eager_inner_run(const Shape& out, const std::vector<const ir::Value*>& inputs) {
  auto broadcast = [&](const Shape& s, size_t k) {  // k: position from the end, 1-based
    return k > s.size() || s[s.size() - k] == 1;
  };
  int64_t run = 1;
  size_t innermost = 0;
  for (size_t k = 1; k <= out.size(); ++k) {
    if (out[out.size() - k] == 1) continue;
    if (innermost) {
      for (const ir::Value* in : inputs) {
        if (broadcast(in->meta.shape, k) != broadcast(in->meta.shape, innermost)) return run;
      }
    } else {
      innermost = k;
    }
    run *= out[out.size() - k];
  }
  return run;
}

}  // namespace

bool CostModel::lone_pointwise_kernel_pays(const ir::Node& n) {
  const Shape& out = n.outputs[0]->meta.shape;
  int64_t elements = 1;
  for (int64_t d : out) elements *= d;
  if (elements < kMinLonePointwiseElements) return false;
  std::vector<const ir::Value*> inputs(n.inputs.begin(), n.inputs.end());
  return eager_inner_run(out, inputs) < kShortBroadcastRun;
}

// Measured: 2048x1024 float32, one thread, process CPU time, minimum of 30 runs (a harness over
// runtime::compile_graph and Graph::run; the kernel-level comparison, 2 threads, is in bench/):
//   layer_norm   generated 0.88 ms, eager 0.79 ms (the eager row kernel has been tuned since the
//                generated one first beat it: 1.62 against 1.75 ms);
//   softmax      generated 4.18 ms, eager 1.65 ms, and log_softmax 3.77 ms against 2.50 ms (an
//                earlier measurement; the gap has only grown): the eager kernel keeps exp(x -
//                running max) in y and only rescales it, where the generated store pass computes
//                exp again; and its float partial sums are cheaper than the generated double ones.
// So a lone row op always runs its eager kernel; with a prologue or epilogue to fuse it is a
// group (one pass over the row less than the ops apart).
bool CostModel::lone_row_kernel_pays(const ir::Node& n, std::string* why) {
  *why = std::string("; alone, ") + n.name() +
         " runs the eager row kernel (measured faster than its generated kernel: fusion/cost_model.cpp)";
  return false;
}

// Measured (OMP_NUM_THREADS=1, cross_entropy over 2048 x 1024 float32, bench/ row "cross_entropy
// 2048x1024"): the eager log_softmax row kernel then the eager nll_loss take 1.33 ms; the one
// generated row kernel with the gather 1.94 ms, although it reads x once and writes nothing per
// element: its online maximum and sum of exponentials run as two loops per block, the first
// bound by memory and the second by arithmetic, where the eager kernel reads the next block
// inside the exponentials' loop. When the row group is a generated kernel anyway (a prologue
// such as a temperature scale, or the backward's exp(logp) in a training step), the gather
// saves the log-probabilities' second read and the nll_loss step.
bool CostModel::gather_pays(int row_ops, std::string* why) {
  if (row_ops >= 2) return true;
  *why = "alone with log_softmax, the eager log_softmax row kernel and the eager nll_loss are faster than one "
         "generated row kernel (fusion/cost_model.cpp; SMELT_FUSE_GATHERS=2 fuses anyway)";
  return false;
}

}  // namespace smelt::fusion::detail
