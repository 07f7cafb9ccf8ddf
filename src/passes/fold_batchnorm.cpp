#include "passes/fold_batchnorm.h"

#include <cmath>
#include <optional>

#include "ops/dispatch.h"
#include "smelt/creation.h"

namespace smelt::passes {
namespace {

using ops::OpId;

// Ops written after this pass may be missing from the op table: looked up by name.
struct FoldOps {
  OpId batch_norm{}, conv2d{}, matmul{};
  bool has_conv2d = false, has_matmul = false;
};

bool single_use(const ir::Graph& g, const ir::Value* v) { return v->uses.size() == 1 && !g.is_output(v); }

// The value of `v` when it is a constant or a chain of views of one (reshape, permute, expand,
// slice, ...), evaluated now with the eager kernels; undefined otherwise.
Tensor constant_value(const ir::Value* v, int depth = 0) {
  if (v->kind == ir::ValueKind::Constant) return v->constant;
  const ir::Node* n = v->producer;
  if (!n || depth > 8 || n->inputs.size() != 1) return {};
  ops::OpKind kind = ops::op_info(n->op).kind;
  if (kind != ops::OpKind::Injective && kind != ops::OpKind::Broadcast) return {};
  Tensor in = constant_value(n->inputs[0], depth + 1);
  if (!in.defined()) return {};
  std::vector<ops::TensorMeta> metas;
  for (const ir::Value* out : n->outputs) metas.push_back(out->meta);
  return ops::compute(n->op, {in}, n->attrs, metas)[size_t(v->output_index)];
}

// The C per-channel values of a constant that broadcasts along dim 1 of a rank-`rank` tensor:
// shape (C,) for rank 2, (C, 1, 1) or (1, C, 1, 1) for rank 4, or a single value for all.
bool per_channel(const ir::Value* v, size_t rank, int64_t channels, std::vector<double>* out) {
  const Shape& shape = v->meta.shape;
  if (shape.size() > rank || !dtype_is_floating(v->meta.dtype)) return false;
  const size_t lead = rank - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && !(lead + d == 1 && shape[d] == channels)) return false;
  }
  Tensor t = constant_value(v);
  if (!t.defined()) return false;
  *out = t.to_vector();
  if (out->size() == 1) out->assign(size_t(channels), (*out)[0]);
  return true;
}

// A batch_norm parameter: a constant of shape (C,).
bool channel_vector(const ir::Value* v, int64_t channels, std::vector<double>* out) {
  if (v->meta.shape != Shape{channels}) return false;
  Tensor t = constant_value(v);
  if (!t.defined()) return false;
  *out = t.to_vector();
  return true;
}

// batch_norm's outputs: y, the statistics backward reads (mean, invstd), then the new running
// statistics, which in eval mode are the running statistics passed in.
constexpr size_t kBatchNormStats = 1, kBatchNormNewRunning = 3;

// An eval-mode batch norm with constant parameters whose batch statistics nobody reads: per
// channel, its scale gamma / sqrt(running_var + eps) and its mean and beta (float64).
struct EvalBatchNorm {
  int64_t channels = 0;
  std::vector<double> scale, mean, beta;
};

std::optional<EvalBatchNorm> eval_batch_norm(const ir::Graph& g, const ir::Node* bn) {
  // Training updates the running statistics from the batch: nothing constant to fold.
  if (bn->attrs.get_int("training", 1) != 0) return std::nullopt;
  for (size_t k = kBatchNormStats; k < kBatchNormNewRunning && k < bn->outputs.size(); ++k) {
    if (!bn->outputs[k]->uses.empty() || g.is_output(bn->outputs[k])) return std::nullopt;
  }
  const ir::Value* x = bn->inputs[0];
  if (x->meta.shape.size() < 2 || !dtype_is_floating(x->meta.dtype)) return std::nullopt;
  EvalBatchNorm out;
  out.channels = x->meta.shape[1];
  std::vector<double> gamma, var;
  if (!channel_vector(bn->inputs[1], out.channels, &gamma) || !channel_vector(bn->inputs[2], out.channels, &out.beta) ||
      !channel_vector(bn->inputs[3], out.channels, &out.mean) || !channel_vector(bn->inputs[4], out.channels, &var)) {
    return std::nullopt;
  }
  const double eps = bn->attrs.get_float("eps", 1e-5);
  out.scale.resize(size_t(out.channels));
  for (size_t c = 0; c < size_t(out.channels); ++c) {
    out.scale[c] = gamma[c] / std::sqrt(var[c] + eps);
    // A variance below -eps (a NaN scale), one that cancels eps (infinite), an infinite or NaN
    // parameter: the
    // eager kernel's (x - mean) * scale + beta and a rewritten x * s + t would disagree (inf - inf
    // where eager gives inf), so such a batch norm stays as it is.
    if (!std::isfinite(out.scale[c]) || !std::isfinite(out.mean[c]) || !std::isfinite(out.beta[c])) return std::nullopt;
  }
  return out;
}

// Eval mode returns the running statistics unchanged: readers of them read the inputs.
void forward_running_statistics(ir::Graph& g, ir::Node* bn) {
  for (size_t k = kBatchNormNewRunning; k < bn->outputs.size(); ++k) g.replace_all_uses(bn->outputs[k], bn->inputs[k]);
}

bool fold_one(ir::Graph& g, ir::Node* bn, const FoldOps& ops) {
  const std::optional<EvalBatchNorm> norm = eval_batch_norm(g, bn);
  if (!norm) return false;
  ir::Value* x = bn->inputs[0];
  const size_t rank = x->meta.shape.size();
  const int64_t channels = norm->channels;
  auto is_contraction = [&](const ir::Value* v) {
    if (!v->producer) return false;
    OpId op = v->producer->op;
    return (ops.has_conv2d && op == ops.conv2d && rank == 4) || (ops.has_matmul && op == ops.matmul && rank == 2);
  };
  // An optional bias add between the contraction and the batch norm.
  ir::Value* z = x;
  std::vector<double> bias(size_t(channels), 0.0);
  if (x->producer && x->producer->op == OpId::add && single_use(g, x)) {
    ir::Node* add = x->producer;
    for (int side : {0, 1}) {
      ir::Value* other = add->inputs[size_t(1 - side)];
      if (is_contraction(other) && other->meta == x->meta &&
          per_channel(add->inputs[size_t(side)], rank, channels, &bias)) {
        z = other;
        break;
      }
    }
  }
  if (!is_contraction(z) || !single_use(g, z)) return false;
  ir::Node* contraction = z->producer;
  Tensor w = constant_value(contraction->inputs[1]);
  if (!w.defined() || w.dtype() != z->meta.dtype) return false;
  const bool conv = rank == 4;
  // conv2d: W (O, C/g, kH, kW), channel = dim 0; matmul: W (in, out), channel = dim 1.
  if (w.dim() != (conv ? 4 : 2) || w.size(conv ? 0 : 1) != channels) return false;

  const std::vector<double>& scale = norm->scale;
  std::vector<double> shift(static_cast<size_t>(channels));
  for (size_t c = 0; c < size_t(channels); ++c) shift[c] = (bias[c] - norm->mean[c]) * scale[c] + norm->beta[c];
  std::vector<double> folded = w.to_vector();
  const int64_t per_out = w.numel() / channels;  // conv: elements per output channel
  for (size_t i = 0; i < folded.size(); ++i) {
    folded[i] *= scale[conv ? i / size_t(per_out) : i % size_t(channels)];
  }
  ir::Value* new_w = g.add_constant(from_vector(folded, w.shape(), w.dtype()));
  Shape shift_shape = conv ? Shape{channels, 1, 1} : Shape{channels};
  ir::Value* new_shift = g.add_constant(from_vector(shift, shift_shape, x->meta.dtype));
  ir::Value* y = g.insert_node(bn, contraction->op, {contraction->inputs[0], new_w}, contraction->attrs)->outputs[0];
  ir::Value* folded_out = g.insert_node(bn, OpId::add, {y, new_shift}, {})->outputs[0];
  SMELT_INTERNAL_CHECK(folded_out->meta == bn->outputs[0]->meta)
      << "fold_batchnorm: folded result " << shape_str(folded_out->meta.shape) << " differs from "
      << shape_str(bn->outputs[0]->meta.shape);
  g.replace_all_uses(bn->outputs[0], folded_out);
  forward_running_statistics(g, bn);
  return true;
}

// Elsewhere (after a concat, a pooling, a graph input, a contraction whose weight is an input),
// an eval-mode batch norm with constant parameters is a per-channel affine map:
//   batch_norm(x) => x * s + t,  s = gamma / sqrt(var + eps), t = beta - mean * s
// (s and t computed in float64, once). As two pointwise ops it fuses with its neighbours (the
// ReLU after it, the blocked layout's per-channel ops) instead of running as an op step of its own.
bool scale_shift_one(ir::Graph& g, ir::Node* bn) {
  const std::optional<EvalBatchNorm> norm = eval_batch_norm(g, bn);
  if (!norm) return false;
  ir::Value* x = bn->inputs[0];
  const size_t rank = x->meta.shape.size();
  const int64_t channels = norm->channels;
  const std::vector<double>& scale = norm->scale;
  std::vector<double> shift(static_cast<size_t>(channels));
  for (size_t c = 0; c < size_t(channels); ++c) shift[c] = norm->beta[c] - norm->mean[c] * scale[c];
  Shape per_channel_shape(rank - 1, 1);  // (C, 1, ..., 1): broadcasts along dim 1
  per_channel_shape[0] = channels;
  ir::Value* s = g.add_constant(from_vector(scale, per_channel_shape, x->meta.dtype));
  ir::Value* t = g.add_constant(from_vector(shift, per_channel_shape, x->meta.dtype));
  ir::Value* scaled = g.insert_node(bn, OpId::mul, {x, s}, {})->outputs[0];
  ir::Value* y = g.insert_node(bn, OpId::add, {scaled, t}, {})->outputs[0];
  SMELT_INTERNAL_CHECK(y->meta == bn->outputs[0]->meta)
      << "fold_batchnorm: scale and shift give " << shape_str(y->meta.shape) << ", the batch norm "
      << shape_str(bn->outputs[0]->meta.shape);
  g.replace_all_uses(bn->outputs[0], y);
  forward_running_statistics(g, bn);
  return true;
}

}  // namespace

bool fold_batchnorm(ir::Graph& graph) {
  FoldOps ops;
  if (!ops::op_from_name("batch_norm", &ops.batch_norm)) return false;
  ops.has_conv2d = ops::op_from_name("conv2d", &ops.conv2d);
  ops.has_matmul = ops::op_from_name("matmul", &ops.matmul);
  bool changed = false;
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (ir::Node* node : order) {
    if (node->op != ops.batch_norm || node->inputs.size() != 5) continue;
    if (node->outputs[0]->uses.empty() && !graph.is_output(node->outputs[0])) continue;
    changed |= fold_one(graph, node, ops) || scale_shift_one(graph, node);
  }
  return changed;
}

}  // namespace smelt::passes
