#include "runtime/contraction_step.h"

#include <algorithm>
#include <cmath>

#include "ops/contraction_tiles.h"

namespace smelt::runtime {
namespace {

// A one-element float constant's value.
std::optional<float> scalar_of(const Tensor* t) {
  if (!t || t->numel() != 1 || t->dtype() != DType::Float32) return std::nullopt;
  return t->contiguous().data<float>()[0];
}

}  // namespace

std::optional<ConvPostOps> conv_epilogue_as_post_ops(const ir::Graph& body,
                                                     const std::function<const Tensor*(const ir::Value*)>& constant_of) {
  if (body.nodes().empty() || body.outputs().size() != 1) return std::nullopt;
  const ir::Node& conv = *body.nodes().front();
  if (conv.op != ops::OpId::conv2d_blocked) return std::nullopt;
  const ops::TensorMeta& y = conv.outputs[0]->meta;
  if (y.dtype != DType::Float32 || y.shape.size() != 5) return std::nullopt;
  auto constant = [&](const ir::Value* v) -> const Tensor* {
    return v->kind == ir::ValueKind::Constant ? &v->constant : constant_of(v);
  };
  ConvPostOps out;
  bool clamped = false;  // a residual add must come before every clamp (oneDNN's post-op order)
  // y + r for a body input r laid out like y (not a constant: a bias broadcasts, a residual does
  // not; it may be the conv's input too): it becomes the binary post-op's operand.
  auto residual = [&](const ir::Value* r) {
    if (constant(r) || !r->is_graph_input() || !(r->meta == conv.outputs[0]->meta)) return false;
    for (size_t i = 0; i < body.inputs().size(); ++i) {
      if (body.inputs()[i] == r) out.residual_input = int(i);
    }
    return out.residual_input >= 0;
  };
  // max(min(max(x, lo), hi), c) = min(max(x, max(lo, c)), max(hi, c)), and min alike.
  auto at_least = [&](float c) {
    clamped = true;
    out.ops.lo = std::max(out.ops.lo, c);
    out.ops.hi = std::max(out.ops.hi, c);
  };
  auto at_most = [&](float c) {
    clamped = true;
    out.ops.lo = std::min(out.ops.lo, c);
    out.ops.hi = std::min(out.ops.hi, c);
  };
  const ir::Value* cur = conv.outputs[0];
  bool first = true;
  for (auto it = std::next(body.nodes().begin()); it != body.nodes().end(); ++it, first = false) {
    const ir::Node& n = **it;
    // Each step reads the previous result once, which nobody else reads.
    if (cur->uses.size() != 1 || cur->uses[0].node != &n || n.outputs.size() != 1 ||
        n.outputs[0]->meta.shape != y.shape || n.outputs[0]->meta.dtype != y.dtype) {
      return std::nullopt;
    }
    const ir::Value* other = nullptr;
    if (n.inputs.size() == 2) other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
    if (n.op == ops::OpId::add && first && other) {
      // y + bias: the bias blocked like y's channels, (1, Cb, 1, 1, B).
      const Tensor* b = constant(other);
      const Shape want{1, y.shape[1], 1, 1, y.shape[4]};
      if (b && b->dtype() == DType::Float32 && b->shape() == want) {
        out.bias = b->contiguous();
      } else if (!residual(other)) {
        return std::nullopt;
      }
    } else if (n.op == ops::OpId::add && other && !clamped && out.residual_input < 0) {
      if (!residual(other)) return std::nullopt;
    } else if (n.op == ops::OpId::relu && n.inputs.size() == 1) {
      at_least(0.0f);
    } else if ((n.op == ops::OpId::maximum || n.op == ops::OpId::minimum) && other) {
      const std::optional<float> c = scalar_of(constant(other));
      if (!c || std::isnan(*c)) return std::nullopt;
      n.op == ops::OpId::maximum ? at_least(*c) : at_most(*c);
    } else if (n.op == ops::OpId::clamp && n.inputs.size() == 1) {
      for (const char* side : {"min", "max"}) {
        if (!n.attrs.has(side)) continue;
        const double c = n.attrs.get_float(side);
        if (std::isnan(c) || double(float(c)) != c) return std::nullopt;  // a bound float cannot hold
        side[1] == 'i' ? at_least(float(c)) : at_most(float(c));
      }
    } else {
      return std::nullopt;
    }
    cur = n.outputs[0];
  }
  if (body.outputs()[0] != cur || !(out.ops.lo <= out.ops.hi)) return std::nullopt;
  return out;
}

void run_tiled_contraction(ops::OpId op, const ops::Attrs& attrs, const std::vector<Tensor>& operands,
                           const Tensor& product, const KernelStep& epilogue,
                           const kernels::EpilogueAsPostOps* post_ops) {
  kernels::GemmEpilogue on_tile;
  on_tile.post_ops = post_ops;
  on_tile.fn = [](void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    static_cast<const KernelStep*>(ctx)->run_tile(r0, r1, c0, c1);
  };
  on_tile.ctx = const_cast<KernelStep*>(&epilogue);
  ops::contraction_with_epilogue(op, operands, attrs, product, on_tile);
}

}  // namespace smelt::runtime
