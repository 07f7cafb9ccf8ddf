// Reductions, softmax, losses and scans -> ONNX. Where an ONNX op moved its axes from an attribute
// to an input (ReduceSum at opset 13, the other Reduce ops at 18) the opset decides which form is
// written. var is a fixed pattern: ReduceMean, the squared deviations, ReduceSum, one division.
#include <algorithm>

#include "onnx/export_builder.h"

namespace smelt::onnx_export {
namespace {

using ops::OpId;

// The reduced dims, non-negative and sorted; every dim when the attribute is absent or empty.
std::vector<int64_t> reduce_axes(const NodeExport& e) {
  const int64_t rank = int64_t(e.in_meta(0).shape.size());
  std::vector<int64_t> axes;
  if (e.attrs().has("dims")) {
    for (int64_t d : e.attrs().get_ints("dims")) axes.push_back(d < 0 ? d + rank : d);
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Reduce<kind>(x) over `axes` into `out`.
void reduce(NodeExport& e, const std::string& kind, const std::string& x, const std::vector<int64_t>& axes,
            bool keepdims, const std::string& out) {
  Builder& b = e.b;
  // ReduceSum takes its axes as an input from opset 13, the others from opset 18.
  const bool axes_input = kind == "ReduceSum" ? b.opset() >= 13 : b.opset() >= 18;
  std::vector<std::string> inputs{x};
  if (axes_input && !axes.empty()) inputs.push_back(b.ints(axes, "axes"));
  ::onnx::NodeProto* n = b.node(kind, inputs, {out});
  if (!axes_input && !axes.empty()) set_attr(n, "axes", axes);
  set_attr(n, "keepdims", int64_t(keepdims ? 1 : 0));
}

// Population or sample variance: sum((x - mean)^2) / (N - correction).
void variance(NodeExport& e) {
  Builder& b = e.b;
  const std::vector<int64_t> axes = reduce_axes(e);
  const DType t = e.in_meta(0).dtype;
  int64_t count = 1;
  for (int64_t d : axes) count *= e.in_meta(0).shape[size_t(d)];
  const std::string mean = b.fresh("var_mean");
  reduce(e, "ReduceMean", e.in[0], axes, true, mean);
  const std::string dev = b.op("Sub", {e.in[0], mean});
  const std::string sum = b.fresh("var_sum");
  reduce(e, "ReduceSum", b.op("Mul", {dev, dev}), axes, e.attrs().get_int("keepdim", 0) != 0, sum);
  const double denom = double(std::max<int64_t>(count - e.attrs().get_int("correction"), 0));
  b.node("Div", {sum, b.scalar(denom, t, "var_count")}, {e.out[0]});
}

const char* reduce_name(OpId op) {
  switch (op) {
    case OpId::sum: return "ReduceSum";
    case OpId::mean: return "ReduceMean";
    case OpId::amax: return "ReduceMax";
    case OpId::amin: return "ReduceMin";
    case OpId::prod: return "ReduceProd";
    default: return nullptr;
  }
}

const char* reduction_name(int64_t r) { return r == 0 ? "none" : r == 1 ? "mean" : "sum"; }

}  // namespace

void export_reduce(NodeExport& e) {
  Builder& b = e.b;
  const OpId op = e.node.op;
  if (const char* kind = reduce_name(op)) {
    reduce(e, kind, e.in[0], reduce_axes(e), e.attrs().get_int("keepdim", 0) != 0, e.out[0]);
    return;
  }
  const int64_t rank = int64_t(e.in_meta(0).shape.size());
  switch (op) {
    case OpId::var:
      variance(e);
      return;
    case OpId::argmax: {  // the first index of the largest value, as smelt
      ::onnx::NodeProto* n = b.node("ArgMax", {e.in[0]}, {e.out[0]});
      set_attr(n, "axis", e.attrs().get_int("dim"));
      set_attr(n, "keepdims", int64_t(e.attrs().get_int("keepdim", 0) != 0));
      set_attr(n, "select_last_index", int64_t(0));
      return;
    }
    case OpId::softmax:
    case OpId::log_softmax: {
      if (rank == 0) e.fail("a 0-dim input has no axis for ONNX " + std::string(op == OpId::softmax ? "Softmax" : "LogSoftmax"));
      ::onnx::NodeProto* n = b.node(op == OpId::softmax ? "Softmax" : "LogSoftmax", {e.in[0]}, {e.out[0]});
      set_attr(n, "axis", e.attrs().get_int("dim"));
      return;
    }
    case OpId::nll_loss: {
      ::onnx::NodeProto* n = b.node("NegativeLogLikelihoodLoss", e.in, {e.out[0]});
      set_attr(n, "reduction", std::string(reduction_name(e.attrs().get_int("reduction"))));
      set_attr(n, "ignore_index", e.attrs().get_int("ignore_index"));
      return;
    }
    case OpId::cumsum: {
      if (rank == 0) e.fail("a 0-dim input has no axis for ONNX CumSum");
      ::onnx::NodeProto* n = b.node("CumSum", {e.in[0], b.int_scalar(e.attrs().get_int("dim"), "axis")}, {e.out[0]});
      set_attr(n, "exclusive", int64_t(e.attrs().get_int("exclusive") != 0));
      set_attr(n, "reverse", int64_t(e.attrs().get_int("reverse") != 0));
      return;
    }
    case OpId::topk: {  // sorted, ties to the lower index (both smelt and ONNX)
      if (rank == 0) e.fail("a 0-dim input has no axis for ONNX TopK");
      ::onnx::NodeProto* n = b.node("TopK", {e.in[0], b.ints({e.attrs().get_int("k")}, "k")}, {e.out[0], e.out[1]});
      set_attr(n, "axis", e.attrs().get_int("dim"));
      set_attr(n, "largest", int64_t(e.attrs().get_int("largest") != 0));
      set_attr(n, "sorted", int64_t(1));
      return;
    }
    default:
      e.fail("internal: not a reduction");
  }
}

}  // namespace smelt::onnx_export
