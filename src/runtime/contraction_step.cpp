#include "runtime/contraction_step.h"

#include <algorithm>
#include <cmath>

#include "ops/contraction_tiles.h"

namespace smelt::runtime {
namespace {

bool same_access(const codegen::Access& a, const codegen::Access& b) {
  return a.offset == b.offset && a.outer_strides == b.outer_strides && a.inner_strides == b.inner_strides;
}

// An output (index into the body's outputs) the GEMM may write the product into and the kernel
// `k` (argument `product_arg` the product) then finish in place; -1 when none fits.
int inplace_output(const codegen::LoopKernel& k, const ir::Graph& body, int product_arg, int first_output_arg) {
  const ops::TensorMeta& product = body.nodes().front()->outputs[0]->meta;
  for (size_t o = 0; o < body.outputs().size(); ++o) {
    const ops::TensorMeta& meta = body.outputs()[o]->meta;
    if (meta.shape != product.shape || meta.dtype != product.dtype) continue;
    const int arg = first_output_arg + int(o);
    const codegen::Access* store = nullptr;
    int stores = 0;
    for (const codegen::Store& s : k.stores) {
      if (k.accesses[size_t(s.access)].arg == arg) store = &k.accesses[size_t(s.access)], ++stores;
    }
    if (stores != 1) continue;
    bool fits = true;
    for (const codegen::Access& a : k.accesses) {
      if (a.arg == product_arg && !same_access(a, *store)) fits = false;
    }
    if (fits) return int(o);
  }
  return -1;
}

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

std::unique_ptr<ir::Graph> contraction_epilogue_body(const ir::Graph& body) {
  std::unique_ptr<ir::Graph> g = body.clone();
  ir::Node* contraction = g->nodes().front().get();
  ir::Value* result = g->add_input(contraction->outputs[0]->meta);
  g->replace_all_uses(contraction->outputs[0], result);
  g->erase_node(contraction);
  return g;
}

std::optional<TiledContraction> lower_tiled_contraction(const ir::Graph& body, const std::string& name,
                                                        const LowerFn& lower) {
  const ir::Node& first = *body.nodes().front();
  std::vector<ops::TensorMeta> metas;
  for (const ir::Value* v : first.inputs) {
    // An operand that fusion moved into the body as a constant (one element) has no slot among
    // the group's inputs: the two-step path gives it one.
    if (!v->is_graph_input()) return std::nullopt;
    metas.push_back(v->meta);
  }
  codegen::LowerOptions options;
  options.tile_col_dims = ops::contraction_tile_col_dims(first.op, metas);
  if (options.tile_col_dims == 0) return std::nullopt;
  TiledContraction t;
  t.lowered = lower(*contraction_epilogue_body(body), name, options);
  if (!t.lowered.kernel) return std::nullopt;
  for (const ir::Value* v : first.inputs) {
    size_t i = 0;
    while (i < body.inputs().size() && body.inputs()[i] != v) ++i;
    SMELT_INTERNAL_CHECK(i < body.inputs().size()) << "plan: a contraction group's first node reads a computed value";
    t.operand_inputs.push_back(int(i));
  }
  for (size_t o = 0; o < body.outputs().size(); ++o) {
    if (body.outputs()[o] == first.outputs[0]) t.product_output = int(o);
  }
  if (t.product_output < 0) {
    const int product_arg = int(body.inputs().size());
    const int first_output_arg = product_arg + 1 + int(t.lowered.constants.size());
    t.product_output = inplace_output(*t.lowered.kernel, body, product_arg, first_output_arg);
  }
  return t;
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
