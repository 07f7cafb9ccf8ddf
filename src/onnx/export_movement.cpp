// Views, joins and indexing -> ONNX. Views become copies (ONNX has no aliasing), shapes and
// ranges become int64 initializers. slice_grad (the gradient of a slice: zeros with the slice set)
// is a Pad, with an interleaving pattern in front for steps above 1; scatter_add and index_add
// are ScatterElements with reduction "add" (opset 16); before it, a floating index_add is a
// MatMul with the index's one-hot rows.
#include <algorithm>

#include "onnx/export_builder.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_export {
namespace {

using ops::OpId;

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }

// Zeros of input_shape with g at [start:end:step] along dim.
void slice_grad(NodeExport& e) {
  Builder& b = e.b;
  const Shape& full = e.out_meta(0).shape;
  Shape gshape = e.in_meta(0).shape;
  const size_t rank = full.size();
  const int64_t dim = wrap(e.attrs().get_int("dim"), rank);
  const int64_t start = e.attrs().get_int("start"), end = e.attrs().get_int("end"), step = e.attrs().get_int("step");
  const std::string zero = b.scalar(0, e.in_meta(0).dtype, "zero");
  std::string g = e.in[0];
  int64_t covered = end - start;  // the span g covers along dim, once spread to stride 1
  if (step > 1 && gshape[size_t(dim)] > 0) {
    // (.., n, ..) -> (.., n, 1, ..) -> pad to (.., n, step, ..) -> (.., n * step, ..): g[i] lands at i * step.
    const int64_t n = gshape[size_t(dim)];
    Shape split = gshape;
    split.insert(split.begin() + dim + 1, 1);
    g = b.op("Reshape", {g, b.ints(split, "shape")});
    std::vector<int64_t> pads(2 * (rank + 1), 0);
    pads[size_t(rank + 1 + dim + 1)] = step - 1;
    g = b.op("Pad", {g, b.ints(pads, "pads"), zero});
    Shape merged = gshape;
    merged[size_t(dim)] = n * step;
    g = b.op("Reshape", {g, b.ints(merged, "shape")});
    covered = std::min(n * step, full[size_t(dim)] - start);
    g = b.op("Slice", {g, b.ints({0}, "starts"), b.ints({covered}, "ends"), b.ints({dim}, "axes")});
  } else if (step > 1) {
    covered = 0;
  }
  std::vector<int64_t> pads(2 * rank, 0);
  pads[size_t(dim)] = start;
  pads[size_t(rank + dim)] = full[size_t(dim)] - start - covered;
  b.node("Pad", {g, b.ints(pads, "pads"), zero}, {e.out[0]});
}

void need_opset(NodeExport& e, int64_t opset, const char* what) {
  if (e.b.opset() < opset) {
    e.fail(std::string(what) + " needs opset " + std::to_string(opset) + " or later; exporting opset " +
           std::to_string(e.b.opset()));
  }
}

void scatter_add(NodeExport& e, const std::string& index, const std::string& src, int64_t dim) {
  need_opset(e, 16, "ScatterElements with reduction 'add'");
  ::onnx::NodeProto* n = e.b.node("ScatterElements", {e.in[0], index, src}, {e.out[0]});
  set_attr(n, "axis", dim);
  set_attr(n, "reduction", std::string("add"));
}

// index_add before opset 16 (no ScatterElements reduction): src's dim contracted with the
// one-hot rows of the index, x + MatMul(src moved so dim is last, OneHot(index) (n, size)),
// moved back. Floating dtypes only (ONNX Runtime's MatMul); the sums may round differently from
// one add after the other.
void index_add_by_matmul(NodeExport& e, int64_t dim) {
  Builder& b = e.b;
  const Shape& x = e.in_meta(0).shape;
  const int64_t rank = int64_t(x.size()), last = rank - 1;
  const DType t = e.in_meta(2).dtype;
  const std::string hot = b.op("OneHot", {e.in[1], b.ints({x[size_t(dim)]}, "depth"),
                                          b.tensor(cast(tensor({0.0, 1.0}), t), "off_on")});
  std::vector<int64_t> perm;  // dim to the end (its own inverse: a swap with the last dim)
  for (int64_t d = 0; d < rank; ++d) perm.push_back(d == dim ? last : d == last ? dim : d);
  auto move = [&](const std::string& v) {
    if (dim == last) return v;
    ::onnx::NodeProto* n = b.node("Transpose", {v});
    set_attr(n, "perm", perm);
    return n->output(0);
  };
  b.node("Add", {e.in[0], move(b.op("MatMul", {move(e.in[2]), hot}))}, {e.out[0]});
}

}  // namespace

void export_movement(NodeExport& e) {
  Builder& b = e.b;
  const size_t rank = e.in_meta(0).shape.size();
  switch (e.node.op) {
    case OpId::reshape: {
      const auto& shape = e.attrs().get_ints("shape");
      // Reshape reads a 0 as "copy the input's dim" unless allowzero=1 (opset 14).
      const bool zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
      if (zero) need_opset(e, 14, "a reshape to a shape with a 0 dim (allowzero)");
      ::onnx::NodeProto* n = b.node("Reshape", {e.in[0], b.ints(shape, "shape")}, {e.out[0]});
      if (zero) set_attr(n, "allowzero", int64_t(1));
      return;
    }
    case OpId::permute: {
      std::vector<int64_t> perm;
      for (int64_t d : e.attrs().get_ints("dims")) perm.push_back(wrap(d, rank));
      if (perm.empty()) {  // a 0-dim tensor: ONNX refuses an empty ints attribute
        b.node("Identity", {e.in[0]}, {e.out[0]});
        return;
      }
      set_attr(b.node("Transpose", {e.in[0]}, {e.out[0]}), "perm", perm);
      return;
    }
    case OpId::slice: {
      const int64_t dim = wrap(e.attrs().get_int("dim"), rank);
      b.node("Slice",
             {e.in[0], b.ints({e.attrs().get_int("start")}, "starts"), b.ints({e.attrs().get_int("end")}, "ends"),
              b.ints({dim}, "axes"), b.ints({e.attrs().get_int("step")}, "steps")},
             {e.out[0]});
      return;
    }
    case OpId::slice_grad:
      slice_grad(e);
      return;
    case OpId::expand:
      b.node("Expand", {e.in[0], b.ints(e.attrs().get_ints("shape"), "shape")}, {e.out[0]});
      return;
    case OpId::contiguous:
      b.node("Identity", {e.in[0]}, {e.out[0]});
      return;
    case OpId::cat:
      set_attr(b.node("Concat", e.in, {e.out[0]}), "axis", wrap(e.attrs().get_int("dim"), rank));
      return;
    case OpId::embedding:
      set_attr(b.node("Gather", e.in, {e.out[0]}), "axis", int64_t(0));
      return;
    case OpId::index_select:
      set_attr(b.node("Gather", e.in, {e.out[0]}), "axis", wrap(e.attrs().get_int("dim"), rank));
      return;
    case OpId::gather:
      set_attr(b.node("GatherElements", e.in, {e.out[0]}), "axis", wrap(e.attrs().get_int("dim"), rank));
      return;
    case OpId::scatter_add: {
      // smelt reads only the leading index-shaped block of src; ScatterElements wants them equal.
      const Shape& index = e.in_meta(1).shape;
      std::string src = e.in[2];
      if (e.in_meta(2).shape != index) {
        std::vector<int64_t> zeros(index.size(), 0), axes(index.size());
        for (size_t d = 0; d < axes.size(); ++d) axes[d] = int64_t(d);
        src = b.op("Slice", {src, b.ints(zeros, "starts"), b.ints(index, "ends"), b.ints(axes, "axes")});
      }
      scatter_add(e, e.in[1], src, wrap(e.attrs().get_int("dim"), rank));
      return;
    }
    case OpId::index_add: {
      // x[.., index[i], ..] += src[.., i, ..]: the 1-D index spread to src's shape along dim.
      const int64_t dim = wrap(e.attrs().get_int("dim"), rank);
      if (b.opset() < 16 && dtype_is_floating(e.in_meta(2).dtype)) {
        index_add_by_matmul(e, dim);
        return;
      }
      const Shape& src = e.in_meta(2).shape;
      Shape column(src.size(), 1);
      column[size_t(dim)] = e.in_meta(1).shape[0];
      const std::string idx = b.op("Reshape", {e.in[1], b.ints(column, "shape")});
      scatter_add(e, b.op("Expand", {idx, b.ints(src, "shape")}), e.in[2], dim);
      return;
    }
    case OpId::one_hot: {
      const std::string depth = b.ints({e.attrs().get_int("num_classes")}, "depth");
      set_attr(b.node("OneHot", {e.in[0], depth, b.ints({0, 1}, "values")}, {e.out[0]}), "axis", int64_t(-1));
      return;
    }
    default:
      e.fail("internal: not a movement or indexing op");
  }
}

}  // namespace smelt::onnx_export
