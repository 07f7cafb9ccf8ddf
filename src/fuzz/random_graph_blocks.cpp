// The generator's blocks for rewrites that need more than one node: contraction + batch norm
// (what fold_batchnorm folds), 4-D images through conv and pools, int64 arithmetic, and rule
// baits. See random_graph.h for what the graphs hold.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fuzz/random_graph_builder.h"
#include "smelt/creation.h"

namespace smelt::fuzz::detail {

void Builder::add_matmul(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int rank = int(s.size());
  const int64_t k = s.back();
  if (rank >= 2 && chance(0.2)) {
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(rank - 1)], perm[size_t(rank - 2)]);
    emit(OpId::matmul, {a, node(OpId::permute, {a}, {{"dims", perm}})});
    return;
  }
  if (rank == 2 && chance(0.3)) {
    add_linear_batch_norm(a);
    return;
  }
  if (rank >= 2 && rank <= 3 && k >= 2 && chance(0.2)) {
    add_attention_split(a);
    return;
  }
  const int64_t n = pick(1, 4);
  Shape b_shape{k, n};
  const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (r < 0.2) {
    b_shape = {k};
  } else if (r < 0.6) {
    // batch dims: a's own (some set to 1), fewer of them, or one new leading dim
    Shape batch(s.begin(), s.end() - std::min(rank, 2));
    for (auto& d : batch) if (chance(0.3)) d = 1;
    if (!batch.empty() && chance(0.3)) batch.erase(batch.begin());
    if (batch.empty() || chance(0.2)) batch.insert(batch.begin(), pick(1, 3));
    b_shape.insert(b_shape.begin(), batch.begin(), batch.end());
  }
  ir::Value* b = constant_or_input(b_shape, a->meta.dtype);
  if (chance(0.2)) {
    emit(OpId::matmul, {b_shape.size() == 1 ? b : a, b_shape.size() == 1 ? a : b});  // also b @ a
  } else {
    emit(OpId::matmul, {a, b});
  }
}

// Attention's split of a projection into queries, keys and heads: slices of a computed (..., M, K)
// value, reshaped into heads and permuted, multiplied — views of one buffer the plan may hand to
// the matmul as strided operands (runtime/plan_build.cpp, strided_view); sometimes the queries are
// scaled first (an elementwise op reading the strided view).
void Builder::add_attention_split(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int64_t r = int64_t(s.size()), k = s.back(), half = k / 2;
  ir::Value* base = node(OpId::mul, {a, graph_->add_constant(scalar_constant(a->meta.dtype))});
  ir::Value* q = node(OpId::slice, {base}, {{"dim", r - 1}, {"start", int64_t(0)}, {"end", half}, {"step", int64_t(1)}});
  ir::Value* key = node(OpId::slice, {base}, {{"dim", r - 1}, {"start", k - half}, {"end", k}, {"step", int64_t(1)}});
  if (chance(0.5)) q = node(OpId::mul, {q, graph_->add_constant(scalar_constant(a->meta.dtype))});
  const int64_t heads = half % 2 == 0 && chance(0.7) ? 2 : 1;
  if (heads == 1 && chance(0.5)) {  // no heads: q @ key^T over the last two dims
    std::vector<int64_t> perm(static_cast<size_t>(r));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
    emit(OpId::matmul, {q, node(OpId::permute, {key}, {{"dims", perm}})});
    return;
  }
  Shape split(s.begin(), s.end() - 1);
  split.push_back(heads);
  split.push_back(half / heads);  // (..., M, heads, d)
  const int64_t R = r + 1;
  std::vector<int64_t> lead(static_cast<size_t>(R - 3));
  std::iota(lead.begin(), lead.end(), 0);
  std::vector<int64_t> q_perm = lead, k_perm = lead;
  q_perm.insert(q_perm.end(), {R - 2, R - 3, R - 1});  // (..., heads, M, d)
  k_perm.insert(k_perm.end(), {R - 2, R - 1, R - 3});  // (..., heads, d, M)
  if (chance(0.3)) {  // dims counted from the end, as exporters and users write them
    for (int64_t& d : k_perm) d -= R;
  }
  ir::Value* qh = node(OpId::permute, {node(OpId::reshape, {q}, {{"shape", split}})}, {{"dims", q_perm}});
  ir::Value* kh = node(OpId::permute, {node(OpId::reshape, {key}, {{"shape", split}})}, {{"dims", k_perm}});
  emit(OpId::matmul, {qh, kh});
}

ir::Value* Builder::wide(ir::Value* x) {
  if (x->meta.dtype == kFoldDType) return node(OpId::clamp, {x}, {{"min", -1e30}, {"max", 1e30}});
  return node(OpId::cast, {x}, {{"dtype", kFoldDType}});
}

ir::Value* Builder::narrow(ir::Value* x) {
  ir::Value* y = node(OpId::cast, {x}, {{"dtype", DType::Float32}});
  return base_dtype_ == DType::Float32 ? y : node(OpId::cast, {y}, {{"dtype", base_dtype_}});
}

ir::Value* Builder::batch_norm_eval(ir::Value* x) {
  const Shape channels{x->meta.shape[1]};
  const DType dt = x->meta.dtype;
  ir::Node* bn = graph_->add_node(
      OpId::batch_norm,
      {x, ordinary_constant(channels, 0.5, 1.5, dt), ordinary_constant(channels, -1, 1, dt),
       ordinary_constant(channels, -0.5, 0.5, dt), ordinary_constant(channels, 0.25, 2, dt)},
      {{"training", int64_t(0)}, {"momentum", 0.1}, {"eps", 1e-5}});
  return bn->outputs[0];
}

void Builder::add_linear_batch_norm(ir::Value* a) {
  const int64_t out = pick(1, 4);
  ir::Value* w = ordinary_constant({out, a->meta.shape[1]}, -2, 2, kFoldDType);
  ir::Value* y = node(OpId::matmul, {wide(a), node(OpId::permute, {w}, {{"dims", Shape{1, 0}}})});
  if (chance(0.5)) y = node(OpId::add, {y, ordinary_constant({out}, -2, 2, kFoldDType)});
  ir::Value* bn = batch_norm_eval(y);
  pool_.push_back(narrow(chance(0.5) ? bn : node(OpId::relu, {bn})));
}

void Builder::add_row_block(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int rank = int(s.size());
  std::vector<int64_t> dims{-1};
  if (rank > 1 && chance(0.25)) dims = {-2, -1};
  const ops::Attrs keep{{"dims", dims}, {"keepdim", int64_t(1)}};
  // an upstream gradient: a itself, a constant or value that broadcasts to a's shape, an input
  ir::Value* g = partner(a);
  if (broadcast_shapes(s, g->meta.shape, "fuzz") != s || g->meta.dtype != a->meta.dtype) {
    g = graph_->add_input({s, a->meta.dtype});
  }
  const int form = pick(0, 5);
  if (form == 1) {  // softmax's backward: y (g - sum(g y))
    ir::Value* y = node(OpId::softmax, {a}, {{"dim", int64_t(-1)}});
    ir::Value* r = node(OpId::sum, {node(OpId::mul, {g, y})}, keep);
    emit(OpId::mul, {y, node(OpId::sub, {g, r})});
  } else if (form == 2) {  // log_softmax's backward: g - exp(y) sum(g)
    ir::Value* y = node(OpId::log_softmax, {a}, {{"dim", int64_t(-1)}});
    if (rank == 2 && s[1] > 0) {  // cross_entropy's forward: nll_loss gathers from y
      add_nll_loss(y);  // with the backward below in its row group (CostModel::gather_pays)
    }
    emit(OpId::sub, {g, node(OpId::mul, {node(OpId::exp, {y}), node(OpId::sum, {g}, keep)})});
  } else if (form == 3) {  // a layer norm's backward: two row means, the epilogue reads both
    ir::Value* gx = node(OpId::mul, {g, a});
    ir::Value* m1 = node(OpId::mean, {gx}, keep);
    ir::Value* m2 = node(OpId::mean, {node(OpId::mul, {gx, a})}, keep);
    ir::Value* t = node(OpId::sub, {node(OpId::mul, {gx, graph_->add_constant(scalar_constant(a->meta.dtype))}), m1});
    emit(OpId::sub, {t, node(OpId::mul, {a, m2})});
  } else if (form == 4) {  // a layer norm written out: a statistic, then another one of the deviations
    constexpr OpId kRowReduce[] = {OpId::sum, OpId::mean, OpId::amax, OpId::amin};
    // the later statistics' dims spelled the other way (-1 or rank - 1), as exporters vary
    ops::Attrs keep2 = keep;
    if (dims.size() == 1 && chance(0.5)) keep2 = {{"dims", std::vector<int64_t>{rank - 1}}, {"keepdim", int64_t(1)}};
    // the deviations, sometimes offered as a value of their own (a group output stored mid-row)
    ir::Value* d = chance(0.3) ? emit(OpId::sub, {a, node(pick_from(kRowReduce), {a}, keep)})
                               : node(OpId::sub, {a, node(pick_from(kRowReduce), {a}, keep)});
    ir::Value* v = node(pick_from(kRowReduce), {node(OpId::mul, {d, chance(0.5) ? d : g})}, keep2);
    if (chance(0.5)) v = node(OpId::rsqrt, {node(OpId::add, {v, graph_->add_constant(scalar_constant(a->meta.dtype))})});
    if (chance(0.3)) v = node(OpId::add, {v, node(pick_from(kRowReduce), {node(OpId::mul, {d, v})}, keep2)});  // a third
    emit(OpId::mul, {d, v});
  } else if (form == 5) {  // a logsumexp written out (masked attention, a CRF): log(sum(exp(x - m))) + m
    ir::Value* m = node(OpId::amax, {a}, keep);
    ir::Value* s = node(OpId::sum, {node(OpId::exp, {node(OpId::sub, {a, m})})}, keep);
    emit(chance(0.5) ? OpId::add : OpId::sub, {node(OpId::log, {s}), m});
  } else {  // generic: a prologue, a reduction, an epilogue reading the row again
    ir::Value* p = chance(0.5) ? a : node(pick_from(kBinary), {a, g});
    if (chance(0.3)) p = node(pick_from(kPlainUnary), {p});
    constexpr OpId kRowReduce[] = {OpId::sum, OpId::mean, OpId::amax, OpId::amin};
    ir::Value* r = node(pick_from(kRowReduce), {p}, keep);
    if (chance(0.3)) r = node(pick_from(kPlainUnary), {r});
    ir::Value* e = node(pick_from(kBinary), chance(0.5) ? std::vector<ir::Value*>{a, r} : std::vector<ir::Value*>{r, a});
    if (chance(0.5)) e = node(pick_from(kBinary), {e, chance(0.5) ? p : g});
    emit(chance(0.3) ? OpId::exp : OpId::neg, {e});
  }
}

// nll_loss over log-probabilities y (N, C): targets a constant in [0, C), ignore_index either
// one of the classes (its rows ignored) or -100; every reduction.
void Builder::add_nll_loss(ir::Value* y) {
  const Shape& s = y->meta.shape;
  ir::Value* t = index_constant({s[0]}, s[1]);
  const int64_t ignore = chance(0.5) ? int64_t(-100) : int64_t(pick(0, int(s[1]) - 1));
  emit(OpId::nll_loss, {y, t}, {{"ignore_index", ignore}, {"reduction", int64_t(pick(0, 2))}});
}

void Builder::add_rule_bait() {
  const auto& inputs = graph_->inputs();
  ir::Value* x = chance(0.5) ? inputs[size_t(pick(0, int(inputs.size()) - 1))] : any_value();
  // Now and then an operand full of -0 (neg(relu(x)) is -0 wherever x <= 0): the zeros' sign is what
  // rules such as x + 0 -> x get wrong, and an input draws -0 only among its special values.
  if (dtype_is_floating(x->meta.dtype) && chance(0.3)) x = node(OpId::neg, {node(OpId::relu, {x})});
  constexpr OpId kRuleOps[] = {OpId::add, OpId::sub, OpId::mul, OpId::div};
  OpId op = pick_from(kRuleOps);
  if (op == OpId::div && !dtype_is_floating(x->meta.dtype)) op = OpId::mul;  // no division by an int 0
  ir::Value* c = graph_->add_constant(scalar_constant(x->meta.dtype));
  ir::Value* y = chance(0.8) ? emit(op, {x, c}) : emit(op, {c, x});
  // Returned at once now and then: a wrong rule's result then reaches an output unmasked (a sign
  // of zero that later arithmetic would erase).
  if (chance(0.25)) graph_->add_output(y);
}

void Builder::add_integer_block(ir::Value* a) {
  ir::Value* x = chance(0.5) ? node(OpId::cast, {a}, {{"dtype", DType::Int64}})
                             : graph_->add_input({broadcastable_to(a->meta.shape), DType::Int64});
  for (int i = pick(1, 4); i > 0; --i) {
    const int which = pick(0, 6);
    if (which == 0) {
      x = node(chance(0.5) ? OpId::neg : OpId::abs, {x});
    } else if (which <= 2) {
      ir::Value* b = chance(0.3) ? x : constant_like(x);
      x = chance(0.5) ? node(pick_from(kIntegerBinary), {x, b}) : node(pick_from(kIntegerBinary), {b, x});
    } else if (which == 3 && chance(0.15)) {
      // a computed divisor, which may hold 0: the graph then fails when run, and every way of
      // running it must fail alike (a fused integer x / 0 would give 0, kernels/scalar.h)
      x = node(OpId::div, {constant_like(x), node(OpId::sub, {x, constant_like(x)})});
    } else if (which == 3) {
      // a constant divisor without zeros (the graph runs; the division may fuse), a scalar or one
      // of several elements (copied into a fused body whatever its size: found by review)
      constexpr int64_t kDivisors[] = {1, -1, 2, -3, 7, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()};
      const Shape shape = chance(0.6) ? Shape{} : broadcastable_to(x->meta.shape);
      std::vector<int64_t> values(size_t(shape_numel(shape)));
      for (int64_t& v : values) v = pick_from(kDivisors);
      x = node(OpId::div, {x, graph_->add_constant(from_vector(values, shape))});
    } else if (which == 4 && !x->meta.shape.empty()) {
      constexpr OpId kIntegerReduce[] = {OpId::sum, OpId::amax, OpId::amin};
      x = node(pick_from(kIntegerReduce), {x}, {{"dims", std::vector<int64_t>{random_dim(x->meta.shape)}},
                                                {"keepdim", int64_t(pick(0, 1))}});
    } else {
      ir::Value* b = constant_like(x);
      x = node(OpId::where, {node(pick_from(kCompare), {x, b}), x, b});
    }
  }
  emit(OpId::cast, {x}, {{"dtype", chance(0.8) ? base_dtype_ : DType::Float64}});
}

void Builder::add_image_block(ir::Value* a) {
  if (chance(0.3)) return add_conv_chain();
  const Shape& s = a->meta.shape;
  ir::Value* x = nullptr;
  if (s.size() == 4) {
    x = a;
  } else if (s.size() >= 2 && s[s.size() - 1] >= 2 && s[s.size() - 2] >= 2) {
    const int64_t h = s[s.size() - 2], w = s.back();
    x = node(OpId::reshape, {a}, {{"shape", Shape{shape_numel(s) / (h * w), 1, h, w}}});
  } else {
    x = graph_->add_input({{pick(1, 2), pick(1, 3), pick(3, 6), pick(3, 6)}, base_dtype_});
  }
  const Shape& xs = x->meta.shape;
  const int64_t k = pick(1, int(std::min<int64_t>(3, std::min(xs[2], xs[3]))));
  const int which = pick(0, 5);
  if (which <= 2) {
    const int64_t channels = xs[1];
    const int64_t groups = channels > 1 && chance(0.3) ? channels : 1;
    const int64_t out = groups * pick(1, 2);
    const bool with_batch_norm = chance(0.6);
    const DType dt = with_batch_norm ? kFoldDType : x->meta.dtype;
    ir::Value* input = with_batch_norm ? wide(x) : x;
    const Shape weight_shape{out, channels / groups, k, k};
    ir::Value* weight = !with_batch_norm           ? constant_or_input(weight_shape, dt)
                        : chance(0.6)              ? ordinary_constant(weight_shape, -2, 2, dt)
                                                   : graph_->add_input({weight_shape, dt});
    const ops::Attrs attrs{{"stride", Shape{pick(1, 2), pick(1, 2)}},
                           {"padding", Shape{pick(0, 1), pick(0, 1)}},
                           {"dilation", Shape{1, pick(1, 2)}},
                           {"groups", groups}};
    ir::Value* y = node(OpId::conv2d, {input, weight}, attrs);
    if (chance(0.5)) {
      ir::Value* b = with_batch_norm ? ordinary_constant({out}, -2, 2, dt) : random_constant({out}, -2, 2, dt);
      ir::Value* bias = node(OpId::reshape, {b}, {{"shape", Shape{1, out, 1, 1}}});
      y = node(OpId::add, {y, bias});
    }
    if (with_batch_norm) y = batch_norm_eval(y);
    if (chance(0.5)) y = node(OpId::relu, {y});
    pool_.push_back(with_batch_norm ? narrow(y) : y);
  } else if (which == 3) {
    const ops::Attrs attrs{{"kernel", Shape{k, k}}, {"stride", Shape{pick(1, 2), pick(1, 2)}},
                           {"padding", Shape{0, k / 2}}, {"dilation", Shape{1, 1}}};
    if (chance(0.3)) {
      // An eval batch norm after a pooling (DenseNet's transitions, a UNet's levels): no
      // contraction to fold into, so fold_batchnorm makes it a per-channel scale and shift. In
      // float64 like the folded blocks (the rewrite rounds differently from the eager kernel).
      ir::Value* y = batch_norm_eval(node(OpId::max_pool2d, {wide(x)}, attrs));
      pool_.push_back(narrow(chance(0.5) ? node(OpId::relu, {y}) : y));
    } else {
      emit(OpId::max_pool2d, {x}, attrs);
    }
  } else if (which == 4) {
    emit(OpId::avg_pool2d, {x}, {{"kernel", Shape{k, k}}, {"stride", Shape{pick(1, 2), pick(1, 2)}},
                                 {"padding", Shape{k / 2, 0}}, {"count_include_pad", int64_t(pick(0, 1))}});
  } else {
    emit(OpId::adaptive_avg_pool2d, {x}, {{"output_size", Shape{pick(1, 3), pick(1, 3)}}});
  }
}

void Builder::add_conv_chain() {
  // Every value a multiple of a power of two, small enough that each sum is exact in float32:
  // then blocked and plain convolutions (oneDNN, im2col + GEMM, any order) give the same bits, and
  // the comparison needs no tolerance to catch a wrong layout. Inputs clamp to [-4, 4] and round
  // to quarters (NaN stays NaN, inf becomes 4); weights are halves in [-1, 1], biases eighths.
  auto quantize = [&](ir::Value* v, double bound, double step) {
    v = node(OpId::clamp, {v}, {{"min", -bound}, {"max", bound}});
    ir::Value* inv = graph_->add_constant(full({}, 1 / step, DType::Float32));
    ir::Value* st = graph_->add_constant(full({}, step, DType::Float32));
    return node(OpId::mul, {node(OpId::round, {node(OpId::mul, {v, inv})}), st});
  };
  const int64_t h = pick(16, 18), w = pick(16, 18);
  ir::Value* x = quantize(graph_->add_input({{1, pick(8, 20), h, w}, DType::Float32}), 4, 0.25);
  if (chance(0.5)) {
    // NaN -> 0 (x == x is false only for NaN): every operand moderate, so the blocked convs take
    // their epilogues (bias, residual, clamp) as oneDNN post-ops, which the special values skip.
    x = node(OpId::where, {node(OpId::eq, {x, x}), x, graph_->add_constant(full({}, 0.0, DType::Float32))});
  }
  // 3x3 with padding 1 or 1x1: the spatial size stays, so every conv has >= 16 * 16 outputs per
  // channel and 16 or more channels. Largest sum: 24 * 9 terms below 720 in 1/16ths (22 bits).
  auto conv = [&](ir::Value* in, int64_t out, bool may_relu = true) {
    const int64_t k = chance(0.6) ? 3 : 1;
    const Shape weight_shape{out, in->meta.shape[1], k, k};
    const Tensor halves = random_tensor(weight_shape, DType::Float32, {-2, 2, 0.0}, rng_).round() * 0.5;
    ir::Value* weight = chance(0.8) ? graph_->add_constant(halves)
                                    : quantize(graph_->add_input({weight_shape, DType::Float32}), 1, 0.5);
    ir::Value* y = node(OpId::conv2d, {in, weight},
                        {{"stride", Shape{1, 1}}, {"padding", Shape{k / 2, k / 2}}, {"dilation", Shape{1, 1}},
                         {"groups", int64_t(1)}});
    if (chance(0.7)) {
      const Tensor eighths = random_tensor({out}, DType::Float32, {-16, 16, 0.0}, rng_).round() * 0.125;
      ir::Value* b = graph_->add_constant(eighths);
      y = node(OpId::add, {y, node(OpId::reshape, {b}, {{"shape", Shape{1, out, 1, 1}}})});
    }
    return may_relu && chance(0.7) ? node(OpId::relu, {y}) : y;
  };
  const int64_t c1 = chance(0.5) ? 16 : pick(16, 24);
  ir::Value* y = conv(x, c1);
  ir::Value* z = chance(0.3) ? y : conv(y, chance(0.5) ? c1 : pick(16, 24));
  if (chance(0.35)) {
    // conv(y) (+ bias) + y, then relu or not (ResNet's block end): the residual is oneDNN's binary
    // post-op of the blocked conv's epilogue, before the clamp
    z = node(OpId::add, {conv(y, c1, /*may_relu=*/false), y});
    if (chance(0.5)) z = node(OpId::relu, {z});
  } else if (z != y && z->meta.shape == y->meta.shape && chance(0.5)) {
    z = node(OpId::add, {z, y});  // a residual after the activation (not a post-op: the order)
  }
  if (chance(0.3)) z = node(OpId::cat, {z, conv(y, 16)}, {{"dim", int64_t(1)}});
  if (chance(0.3)) {
    z = node(OpId::max_pool2d, {z}, {{"kernel", Shape{3, 3}}, {"stride", Shape{1, 1}}, {"padding", Shape{1, 1}},
                                     {"dilation", Shape{1, 1}}});
  }
  pool_.push_back(z);
}

}  // namespace smelt::fuzz::detail
