#include "passes/blocked_layout.h"

#include <algorithm>

#include "base/env.h"
#include "base/log.h"
#include "kernels/conv_blocked.h"
#include "kernels/conv_onednn.h"
#include "ops/op_util.h"
#include "ops/conv_geometry.h"
#include "ops/dispatch.h"

namespace smelt::passes {
namespace {

using ops::OpId;

constexpr int64_t kBlock = kernels::kOneDnnBlock;
// A conv with fewer input channels (a stem on RGB) reads its input on NCHW: padded to 16 they
// would cost more than the convolution.
constexpr int64_t kMinBlockedChannels = 8;
// Smaller convs (output elements) stay plain: oneDNN's per-call costs outweigh what it saves.
// (A non-finite weight meeting the zero padding, where oneDNN and smelt's reference once disagreed,
// takes the reference path: kernels/conv_onednn.h, conv2d_onednn_exact.)
constexpr int64_t kMinBlockedOutput = 4096;

// Read on every run (once per compile): a test or a session may switch it between compiles.
bool enabled() { return env_int("SMELT_BLOCKED_LAYOUT", 1, 0, 1) != 0; }

bool is_from_blocked(const ir::Value* v) { return v->producer && v->producer->op == OpId::from_blocked; }

ir::Value* blocked_source(const ir::Value* v) { return v->producer->inputs[0]; }

ir::Value* insert(ir::Graph& g, ir::Node* before, OpId op, const std::vector<ir::Value*>& in, const ops::Attrs& a) {
  return g.insert_node(before, op, in, a)->outputs[0];
}

// An existing to_blocked of v, or null.
ir::Value* existing_blocked(const ir::Value* v) {
  for (const ir::Use& u : v->uses) {
    if (u.node->op == OpId::to_blocked && u.node->attrs.get_int("block") == kBlock) return u.node->outputs[0];
  }
  return nullptr;
}

// Whether node a comes before node b in the graph's order.
bool comes_before(const ir::Graph& g, const ir::Node* a, const ir::Node* b) {
  for (const auto& n : g.nodes()) {
    if (n.get() == a) return true;
    if (n.get() == b) return false;
  }
  return false;
}

// v in the blocked layout: the value it was converted from when there is one, else its existing
// conversion (one per value, however many blocked ops read it), else a new to_blocked.
ir::Value* as_blocked(ir::Graph& g, ir::Node* before, ir::Value* v) {
  if (is_from_blocked(v) && blocked_source(v)->meta.shape[4] == kBlock) return blocked_source(v);
  if (ir::Value* converted = existing_blocked(v); converted && comes_before(g, converted->producer, before)) {
    return converted;
  }
  return insert(g, before, OpId::to_blocked, {v}, {{"block", kBlock}});
}

ir::Value* unblock(ir::Graph& g, ir::Node* before, ir::Value* blocked, int64_t channels) {
  return insert(g, before, OpId::from_blocked, {blocked}, {{"channels", channels}});
}

// A conv2d the blocked layout can take: float32 NCHW, large enough, and native to oneDNN.
bool blockable(const ir::Node& node, kernels::Conv2dGeometry* geometry = nullptr) {
  if (node.op != OpId::conv2d || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
  const ir::Value *x = node.inputs[0], *w = node.inputs[1];
  if (x->meta.dtype != DType::Float32 || x->meta.shape.size() != 4 || w->meta.shape.size() != 4) return false;
  const kernels::Conv2dGeometry geo = ops::conv2d_geometry(x->meta.shape, w->meta.shape, node.attrs);
  if (geo.N * geo.O * geo.Ho * geo.Wo < kMinBlockedOutput) return false;
  if (geometry) *geometry = geo;
  return kernels::conv2d_blocked_native(geo, DType::Float32, kBlock, /*plain_input=*/geo.C < kMinBlockedChannels);
}

// conv2d(x, w) -> from_blocked(conv2d_blocked(to_blocked(x), w))
bool block_conv(ir::Graph& g, ir::Node* node) {
  kernels::Conv2dGeometry geo;
  if (!blockable(*node, &geo)) return false;
  ir::Value* x = node->inputs[0];
  ir::Value* w = node->inputs[1];
  const bool stem = geo.C < kMinBlockedChannels;
  ops::Attrs attrs = node->attrs;
  if (stem) {
    attrs.set("block", kBlock);
  } else {
    attrs.set("channels", geo.C);
  }
  ir::Value* y = insert(g, node, OpId::conv2d_blocked, {stem ? x : as_blocked(g, node, x), w}, attrs);
  g.replace_all_uses(node->outputs[0], unblock(g, node, y, geo.O));
  return true;
}

// to_blocked(from_blocked(v)) -> v
bool cancel(ir::Graph& g, ir::Node* node) {
  ir::Value* x = node->inputs[0];
  if (!is_from_blocked(x) || blocked_source(x)->meta.shape[4] != node->attrs.get_int("block")) return false;
  g.replace_all_uses(node->outputs[0], blocked_source(x));
  return true;
}

bool keeps_finite(OpId op) {
  switch (op) {
    case OpId::add: case OpId::sub: case OpId::mul: case OpId::maximum: case OpId::minimum:
    case OpId::relu: case OpId::clamp: case OpId::leaky_relu: case OpId::neg: case OpId::abs:
    case OpId::sigmoid: case OpId::tanh: case OpId::silu: case OpId::gelu:
      return true;
    default:
      return false;
  }
}

// A constant operand of a blocked elementwise op, blocked now: (C) as (1, C, 1, 1) and so on up to
// rank 4, then to_blocked when it has the channels, else a trailing lane dim of 1.
ir::Value* blocked_constant(ir::Graph& g, const Tensor& c, int64_t channels) {
  Shape s(4 - c.dim(), 1);
  s.insert(s.end(), c.shape().begin(), c.shape().end());
  Tensor four = c.contiguous().reshape(s);
  if (s[1] == channels) return g.add_constant(ops::call1(OpId::to_blocked, {four}, {{"block", kBlock}}));
  s.push_back(1);
  return g.add_constant(four.reshape(s));
}

// A computed (N, C, 1, 1) operand of an elementwise op over (N, C, H, W): a squeeze-excitation
// scale. Blocked it is (N, C/16, 1, 1, 16), which broadcasts over the blocked (N, C/16, H, W, 16).
bool per_channel(const ir::Value* in, const ops::TensorMeta& out) {
  const Shape& s = in->meta.shape;
  return in->kind == ir::ValueKind::Computed && s.size() == 4 && s[0] == out.shape[0] && s[1] == out.shape[1] &&
         s[2] == 1 && s[3] == 1 && in->meta.dtype == out.dtype;
}

// f(from_blocked(a), ...) -> from_blocked(f(a, ...))
bool sink_elementwise(ir::Graph& g, ir::Node* node) {
  const ops::TensorMeta& out = node->outputs[0]->meta;
  if (out.shape.size() != 4 || !dtype_is_floating(out.dtype) || !keeps_finite(node->op)) return false;
  bool any_blocked = false;
  for (ir::Value* in : node->inputs) {
    if (is_from_blocked(in) && in->meta.shape == out.shape) {
      any_blocked = true;
    } else if (in->meta.shape == out.shape && existing_blocked(in)) {
      // converted for another blocked op already (a residual's input, converted for its conv):
      // the second conversion inserted here merges with it in cse.
    } else if (!ops::all_size_one(in->meta.shape) && !per_channel(in, out) &&
               !(in->kind == ir::ValueKind::Constant && in->meta.shape.size() <= 4 && in->meta.dtype == out.dtype)) {
      return false;
    }
  }
  if (!any_blocked) return false;
  const int64_t channels = out.shape[1];
  std::vector<ir::Value*> operands;
  for (ir::Value* in : node->inputs) {
    if (in->meta.shape == out.shape) {
      operands.push_back(as_blocked(g, node, in));
    } else if (ops::all_size_one(in->meta.shape)) {
      operands.push_back(in);
    } else if (per_channel(in, out)) {
      operands.push_back(as_blocked(g, node, in));  // C values: a conversion costs nothing
    } else {
      // A constant with a size-C dim elsewhere than dim 1 would broadcast against the wrong dim.
      Shape s(4 - in->meta.shape.size(), 1);
      s.insert(s.end(), in->meta.shape.begin(), in->meta.shape.end());
      if (s[2] != 1 || s[3] != 1 || s[0] != 1) return false;
      operands.push_back(blocked_constant(g, in->constant, channels));
    }
  }
  ir::Value* f = insert(g, node, node->op, operands, node->attrs);
  g.replace_all_uses(node->outputs[0], unblock(g, node, f, channels));
  return true;
}

// mean over H and W of a blocked value: the lanes are channels, so dims 2 and 3 are H and W in
// both layouts.
bool sink_mean(ir::Graph& g, ir::Node* node) {
  ir::Value* x = node->inputs[0];
  if (!is_from_blocked(x) || x->meta.shape.size() != 4 || !node->attrs.has("dims")) return false;
  std::vector<int64_t> dims = node->attrs.get_ints("dims");
  for (int64_t& d : dims) d = d < 0 ? d + 4 : d;
  std::sort(dims.begin(), dims.end());
  if (dims != std::vector<int64_t>{2, 3}) return false;
  ops::Attrs attrs = node->attrs;
  attrs.set("dims", std::vector<int64_t>{2, 3});
  attrs.set("keepdim", int64_t(1));
  const int64_t channels = x->meta.shape[1];
  ir::Value* m = insert(g, node, OpId::mean, {as_blocked(g, node, x)}, attrs);
  ir::Value* plain = unblock(g, node, m, channels);
  if (node->attrs.get_int("keepdim", 0) == 0) {
    plain = insert(g, node, OpId::reshape, {plain}, {{"shape", node->outputs[0]->meta.shape}});
  }
  g.replace_all_uses(node->outputs[0], plain);
  return true;
}

// cat along channels of blocked values whose blocks line up: all but the last a multiple of 16.
// Plain float32 operands beside blocked ones are converted (once each, however many cats read
// them: a DenseNet block's input, pooled in NCHW, is an operand of every concat in the block).
bool sink_cat(ir::Graph& g, ir::Node* node) {
  const ops::TensorMeta& out = node->outputs[0]->meta;
  if (out.shape.size() != 4 || out.dtype != DType::Float32) return false;
  int64_t dim = node->attrs.get_int("dim");
  if (dim < 0) dim += 4;
  if (dim != 1) return false;
  bool any_blocked = false;
  for (size_t i = 0; i < node->inputs.size(); ++i) {
    const ir::Value* in = node->inputs[i];
    if (is_from_blocked(in)) {
      if (blocked_source(in)->meta.shape[4] != kBlock) return false;
      any_blocked = true;
    }
    if (i + 1 < node->inputs.size() && in->meta.shape[1] % kBlock != 0) return false;
  }
  if (!any_blocked) return false;
  std::vector<ir::Value*> operands;
  for (ir::Value* in : node->inputs) operands.push_back(as_blocked(g, node, in));
  ir::Value* c = insert(g, node, OpId::cat, operands, {{"dim", int64_t(1)}});
  g.replace_all_uses(node->outputs[0], unblock(g, node, c, out.shape[1]));
  return true;
}

// max_pool2d(from_blocked(a)) -> from_blocked(max_pool2d_blocked(a)) when no one reads its indices.
bool sink_max_pool(ir::Graph& g, ir::Node* node) {
  ir::Value *x = node->inputs[0], *indices = node->outputs[1];
  if (!is_from_blocked(x) || !indices->uses.empty() || g.is_output(indices)) return false;
  ir::Value* values = node->outputs[0];
  if (values->uses.empty() && !g.is_output(values)) return false;
  ir::Value* p = insert(g, node, OpId::max_pool2d_blocked, {blocked_source(x)}, node->attrs);
  g.replace_all_uses(values, unblock(g, node, p, x->meta.shape[1]));
  return true;
}

}  // namespace

bool blocked_layout(ir::Graph& graph) {
  if (!enabled()) return false;
  std::vector<ir::Node*> order;
  int convs_in_graph = 0;
  for (const auto& n : graph.nodes()) {
    order.push_back(n.get());
    convs_in_graph += n->op == OpId::conv2d_blocked || blockable(*n);
  }
  // A lone convolution gains nothing from the layout: converting its input and its output costs
  // what oneDNN's own reorders cost, as separate steps (a compiled 3x3 64->64 conv + bias + relu
  // at 56x56, 2 threads: 0.47 ms blocked, 0.39 ms plain, 0.40 ms eager).
  if (convs_in_graph < 2) return false;
  int convs = 0, moved = 0;
  for (ir::Node* node : order) {
    if (node->op == OpId::max_pool2d) {
      moved += sink_max_pool(graph, node);
      continue;
    }
    if (node->outputs.size() != 1) continue;
    ir::Value* out = node->outputs[0];
    if (out->uses.empty() && !graph.is_output(out)) continue;  // dead: dce's job
    if (node->op == OpId::conv2d && node->inputs.size() == 2) {
      convs += block_conv(graph, node);
    } else if (node->op == OpId::to_blocked) {
      moved += cancel(graph, node);
    } else if (node->op == OpId::mean) {
      moved += sink_mean(graph, node);
    } else if (node->op == OpId::cat) {
      moved += sink_cat(graph, node);
    } else if (ops::op_info(node->op).kind == ops::OpKind::Elementwise) {
      moved += sink_elementwise(graph, node);
    }
  }
  if (convs + moved > 0) {
    debug_log(2, "blocked_layout: " + std::to_string(convs) + " convs blocked, " + std::to_string(moved) +
                     " ops moved into the blocked layout or conversions cancelled");
  }
  return convs + moved > 0;
}

}  // namespace smelt::passes
