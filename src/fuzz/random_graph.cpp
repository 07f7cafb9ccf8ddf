#include "fuzz/random_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <variant>

#include "fuzz/custom_view.h"
#include "fuzz/random_graph_builder.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz {
namespace detail {

std::unique_ptr<ir::Graph> Builder::build() {
  base_dtype_ = chance(0.2) ? DType::Float64 : DType::Float32;
  Shape base = random_shape();
  int num_inputs = pick(1, 3);
  for (int i = 0; i < num_inputs; ++i) {
    pool_.push_back(graph_->add_input({broadcastable_to(base), base_dtype_}));
  }
  int nodes = pick(1, opt_.max_nodes);
  for (int i = 0; i < nodes; ++i) {
    // The shape rules are the judge: a node they reject is not added; try another one.
    for (int attempt = 0; attempt < 4; ++attempt) {
      try {
        add_random_node();
        break;
      } catch (const Error&) {
      }
    }
  }
  // The newest value is always an output; a few others too.
  graph_->add_output(pool_.back());
  for (ir::Value* v : pool_) {
    if (v != pool_.back() && !v->is_graph_input() && chance(0.15)) graph_->add_output(v);
  }
  return std::move(graph_);
}

void Builder::add_random_node() {
  ir::Value* a = recent_value();
  const Shape& s = a->meta.shape;
  const int kind = pick(0, 44);
  if (kind < 10) {
    add_unary(a);
  } else if (kind < 18) {
    ir::Value* b = partner(a);
    if (chance(0.5)) std::swap(a, b);
    OpId op = pick_from(kBinary);
    // int64 values reach here too (the integer block and rule baits emit them); a zero integer
    // divisor is an error when the graph runs, so they are not divided by random values
    if (op == OpId::div && !dtype_is_floating(a->meta.dtype)) op = OpId::sub;
    emit(op, {a, b});
  } else if (kind < 20) {
    add_select(a);
  } else if (kind < 23 && !s.empty()) {
    add_reduction(a);
  } else if (kind < 25 && !s.empty()) {
    add_normalization(a);
  } else if (kind < 27 && !s.empty()) {
    add_matmul(a);
  } else if (kind < 28 && !s.empty()) {
    add_cat(a);
  } else if (kind < 29 && !s.empty()) {
    add_indexing(a);
  } else if (kind < 30) {
    add_pow(a);
  } else if (kind < 31) {
    add_cast(a);
  } else if (kind < 32) {
    add_image_block(a);
  } else if (kind < 34) {
    add_integer_block(a);
  } else if (kind < 37) {
    add_rule_bait();
  } else {
    add_view(a);
  }
}

void Builder::add_unary(ir::Value* a) {
  OpId op = pick_from(kUnary);
  ops::Attrs attrs;
  if (op == OpId::leaky_relu) attrs.set("negative_slope", chance(0.7) ? 0.1 : special_float(DType::Float64, rng_));
  if (op == OpId::gelu) attrs.set("approximate", int64_t(pick(0, 1)));
  if (op == OpId::softplus) attrs = {{"beta", chance(0.8) ? 1.0 : 0.5}, {"threshold", 20.0}};
  if (op == OpId::clamp) attrs = clamp_bounds();
  if (op == OpId::dropout) {  // the identity only: eval mode, or p = 0 (the results stay deterministic)
    attrs = chance(0.5) ? ops::Attrs{{"p", 0.5}, {"training", int64_t(0)}}
                        : ops::Attrs{{"p", 0.0}, {"training", int64_t(1)}};
    // A constant generator state (its last input); the identity draws nothing from it.
    emit(op, {a, graph_->add_constant(generator_state_tensor({0, 0}))}, attrs);
    return;
  }
  if (chance(0.15)) {
    if (auto twin = attribute_twin(attrs)) {
      emit(OpId::sub, {node(op, {a}, attrs), node(op, {a}, *twin)});
      return;
    }
  }
  emit(op, {a}, attrs);
}

std::optional<ops::Attrs> Builder::attribute_twin(const ops::Attrs& attrs) {
  ops::Attrs twin;
  bool moved = false;
  for (const auto& [name, value] : attrs.items()) {
    const double* v = std::get_if<double>(&value);
    if (v && !moved && std::isfinite(*v)) {
      twin.set(name, *v == 0 ? -*v : std::nextafter(*v, std::numeric_limits<double>::infinity()));
      moved = true;
    } else {
      twin.set(name, value);
    }
  }
  if (!moved) return std::nullopt;
  return twin;
}

ops::Attrs Builder::clamp_bounds() {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double kLow[] = {-0.5, 0.0, -0.0, -1e30, 1.5, nan};
  const double kHigh[] = {1.5, 0.0, -0.0, 1e30, -0.5, nan};
  auto bound = [&](const double (&finite)[6], double infinite) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    return r < 0.75 ? pick_from(finite) : r < 0.9 ? infinite : -infinite;
  };
  ops::Attrs attrs;
  const int which = pick(0, 3);  // 0: both, 1: min only, 2: max only, 3: both
  if (which != 2) attrs.set("min", bound(kLow, -inf));
  if (which != 1) attrs.set("max", bound(kHigh, inf));
  return attrs;
}

void Builder::add_select(ir::Value* a) {
  ir::Value* b = chance(0.7) ? partner(a) : constant_like(a);
  ir::Value* cond = node(pick_from(kCompare), {a, b});
  if (chance(0.7)) {
    emit(OpId::where, {cond, a, b});
  } else {
    emit(OpId::where, {cond, constant_like(a), a});
  }
}

void Builder::add_reduction(ir::Value* a) {
  const Shape& s = a->meta.shape;
  if (dtype_is_floating(a->meta.dtype) && chance(0.5)) {
    add_row_block(a);
    return;
  }
  std::vector<int64_t> dims{random_dim(s)};
  if (s.size() > 1 && chance(0.3)) {
    int64_t other = random_dim(s);
    if (other != dims[0]) dims.push_back(other);
  }
  const int64_t keepdim = pick(0, 1);
  const int which = pick(0, 5);
  if (which < 4) {
    emit(kReduce[which], {a}, {{"dims", dims}, {"keepdim", keepdim}});
  } else if (which == 4) {
    emit(OpId::var, {a}, {{"dims", dims}, {"keepdim", keepdim}, {"correction", int64_t(pick(0, 1))}});
  } else {  // argmax gives Int64: back to a's dtype for the nodes after it
    ir::Value* index = node(OpId::argmax, {a}, {{"dim", dims[0]}, {"keepdim", keepdim}});
    emit(OpId::cast, {index}, {{"dtype", a->meta.dtype}});
  }
}

void Builder::add_normalization(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int rank = int(s.size());
  if (dtype_is_floating(a->meta.dtype) && chance(0.3)) {  // a backward rule of one of them
    add_row_block(a);
    return;
  }
  if (chance(0.6)) {
    const OpId op = chance(0.5) ? OpId::softmax : OpId::log_softmax;
    if (op == OpId::log_softmax && rank == 2 && s[1] > 0 && chance(0.5)) {
      // cross_entropy's forward over temperature-scaled logits (a row group that nll_loss joins)
      // or, along dim 0, one that does not gather
      ir::Value* scaled = node(OpId::mul, {a, graph_->add_constant(scalar_constant(a->meta.dtype))});
      add_nll_loss(emit(op, {scaled}, {{"dim", int64_t(pick(-rank, rank - 1))}}));
      return;
    }
    emit(op, {a}, {{"dim", int64_t(pick(-rank, rank - 1))}});
    return;
  }
  const int64_t ndim = pick(1, std::min(rank, 2));
  const Shape normalized(s.end() - ndim, s.end());
  const DType dt = a->meta.dtype;
  emit(OpId::layer_norm, {a, random_constant(normalized, 0.5, 1.5, dt), constant_or_input(normalized, dt)},
       {{"ndim", ndim}, {"eps", 1e-5}});
}

void Builder::add_cat(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int64_t dim = random_dim(s);
  std::vector<ir::Value*> parts{a};
  for (int i = pick(1, 2); i > 0; --i) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    ir::Value* part = a;
    if (r < 0.5) {
      Shape other = s;
      other[size_t(dim)] = pick(1, 3);
      part = random_constant(other, -2, 2, a->meta.dtype);
    } else if (r < 0.8) {
      for (int tries = 0; tries < 6; ++tries) {
        ir::Value* v = any_value();
        if (v->meta == a->meta) part = v;
      }
    }
    parts.insert(parts.begin() + pick(0, int(parts.size())), part);
  }
  emit(OpId::cat, parts, {{"dim", dim}});
}

void Builder::add_indexing(ir::Value* a) {
  const Shape& s = a->meta.shape;
  const int64_t dim = random_dim(s);
  // Along dim 0 (the batch of the compile fuzzer's second batch sizes), often the largest index
  // valid now too: out of range at a smaller batch, where the plan must raise as eager does.
  const bool top = dim == 0 && chance(0.3);
  if (chance(0.5)) {
    const int64_t high = s[size_t(dim)] + (chance(0.01) ? 3 : 0);
    emit(OpId::index_select, {a, index_constant({pick(1, 4)}, high, top)}, {{"dim", dim}});
    return;
  }
  Shape index_shape = s;
  for (size_t d = 0; d < s.size(); ++d) {
    index_shape[d] = int64_t(d) == dim ? pick(1, 4) : pick(1, int(s[d]));
  }
  emit(OpId::gather, {a, index_constant(index_shape, s[size_t(dim)], top)}, {{"dim", dim}});
}

void Builder::add_pow(ir::Value* a) {
  constexpr double kExponents[] = {0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1.5, -0.0};
  if (chance(0.7)) {
    double e = chance(0.8) ? pick_from(kExponents) : special_float(a->meta.dtype, rng_);
    ir::Value* base = e == std::floor(e) || chance(0.2) ? a : node(OpId::abs, {a});
    emit(OpId::pow, {base, graph_->add_constant(scalar_tensor(e, a->meta.dtype))});
  } else {
    ir::Value* base = node(OpId::sigmoid, {a});  // in (0, 1)
    emit(OpId::pow, {base, partner(a)});
  }
}

void Builder::add_cast(ir::Value* a) {
  const int which = pick(0, 3);
  if (which == 3) {
    add_quantize_round_trip(a);
    return;
  }
  if (which == 0) {  // to the other float dtype (float64 -> float32 overflows and flushes)
    const DType other = a->meta.dtype == DType::Float32 ? DType::Float64 : DType::Float32;
    ir::Value* wide = node(OpId::cast, {a}, {{"dtype", other}});
    if (chance(0.5)) wide = node(pick_from(kPlainUnary), {wide});
    if (chance(0.5)) wide = node(pick_from(kBinary), {wide, constant_like(wide)});
    emit(OpId::cast, {wide}, {{"dtype", a->meta.dtype}});
  } else if (which == 1) {
    ir::Value* ints = node(OpId::cast, {a}, {{"dtype", DType::Int64}});
    emit(OpId::cast, {ints}, {{"dtype", a->meta.dtype}});
  } else {
    ir::Value* mask = node(OpId::cast, {a}, {{"dtype", DType::Bool}});
    emit(OpId::where, {mask, a, partner(a)});
  }
}

void Builder::add_quantize_round_trip(ir::Value* a) {
  // scales where x / s rounds at half steps, saturates early, or overflows to inf (a subnormal),
  // and one where dequantizing overflows ((q - z) * s beyond float32: quantizing that again
  // saturates instead of giving q back)
  constexpr double kScales[] = {0.1, 0.02, 0.5, 3.0, 1e-3, 1e-40, 1e37};
  const DType q = chance(0.5) ? DType::UInt8 : DType::Int8;
  constexpr int kUnsignedZeros[] = {0, 128, 255, 17}, kSignedZeros[] = {-128, 0, 127, -3};
  const int32_t zero_point = q == DType::UInt8 ? pick_from(kUnsignedZeros) : pick_from(kSignedZeros);
  ir::Value* scale = graph_->add_constant(full({}, pick_from(kScales), DType::Float32));
  ir::Value* zero = graph_->add_constant(full({}, zero_point, q));
  ir::Value* v = node(OpId::quantize_linear, {a, scale, zero}, {{"axis", int64_t(1)}});
  v = node(OpId::dequantize_linear, {v, scale, zero}, {{"axis", int64_t(1)}});
  if (!a->meta.shape.empty() && chance(0.3)) {
    // Another value quantized alike, concatenated with it (then max-pooled, in 4-D), quantized again
    // with the first parameters (a Fire module's concat): sink_dequantize concatenates and pools the
    // bytes and cancels the quantize of the dequantize, which must give the float chain's bits.
    // (or quantized otherwise, a different scale or zero point: then the bytes cannot be joined)
    ir::Value* other_scale = chance(0.7) ? scale : graph_->add_constant(full({}, pick_from(kScales), DType::Float32));
    ir::Value* other_zero = chance(0.8) ? zero : graph_->add_constant(full({}, zero_point == 0 ? 1 : 0, q));
    // (its bytes a quantization, or any bytes: a cast, as an integer op's output can be any byte)
    ir::Value* other = chance(0.5) ? node(OpId::quantize_linear, {node(OpId::neg, {a}), other_scale, other_zero},
                                          {{"axis", int64_t(1)}})
                                   : node(OpId::cast, {node(OpId::neg, {a})}, {{"dtype", q}});
    other = node(OpId::dequantize_linear, {other, other_scale, other_zero}, {{"axis", int64_t(1)}});
    const int64_t dim = pick(0, int(a->meta.shape.size()) - 1);
    v = chance(0.5) ? node(OpId::cat, {v, other}, {{"dim", dim}}) : node(OpId::cat, {other, v, v}, {{"dim", dim}});
    if (v->meta.shape.size() == 4 && chance(0.5)) {
      const int64_t k = pick(1, 3);
      v = graph_->add_node(OpId::max_pool2d, {v},
                           {{"kernel", Shape{k, k}}, {"stride", Shape{pick(1, 2), 1}}, {"padding", Shape{k / 2, 0}},
                            {"dilation", Shape{1, 1}}})
              ->outputs[0];
    }
    v = node(OpId::quantize_linear, {v, scale, zero}, {{"axis", int64_t(1)}});
    // read back as bytes of another scale sometimes, so that every byte counts (with the same
    // scale, a byte whose dequantized value overflows reads back as the same inf either way)
    ir::Value* read_scale = chance(0.7) ? scale : graph_->add_constant(full({}, 0.5, DType::Float32));
    v = node(OpId::dequantize_linear, {v, read_scale, zero}, {{"axis", int64_t(1)}});
  }
  if (chance(0.5)) {  // a float op between quantized values, quantized again (a residual block)
    ir::Value* f = node(chance(0.5) ? OpId::relu : OpId::neg, {v});
    v = node(OpId::add, {f, v});
    ir::Value* scale2 = graph_->add_constant(full({}, pick_from(kScales), DType::Float32));
    ir::Value* q2 = node(OpId::quantize_linear, {v, scale2, zero}, {{"axis", int64_t(1)}});
    v = node(OpId::dequantize_linear, {q2, scale2, zero}, {{"axis", int64_t(1)}});
  }
  emit(OpId::cast, {v}, {{"dtype", a->meta.dtype}});
}

void Builder::add_view(ir::Value* a) {
  const Shape& s = a->meta.shape;
  int kind = pick(0, 4);
  if (kind == 4 && s.size() >= 2) {  // a user's view op (fuzz/custom_view.h)
    emit(diagonal_view_id(), {a});
  } else if (kind == 0 || s.empty()) {  // reshape: flatten, or split the first dim off
    Shape to{shape_numel(s)};
    if (chance(0.5) && !s.empty()) {
      to = {s[0], shape_numel(s) / std::max<int64_t>(s[0], 1)};
    }
    emit(OpId::reshape, {a}, {{"shape", to}});
  } else if (kind == 1) {
    std::vector<int64_t> perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    emit(OpId::permute, {a}, {{"dims", perm}});
  } else if (kind == 2) {
    int64_t d = pick(0, int(s.size()) - 1);
    int64_t start = pick(0, int(s[size_t(d)]) - 1);
    int64_t end = pick(int(start) + 1, int(s[size_t(d)]));
    emit(OpId::slice, {a}, {{"dim", d}, {"start", start}, {"end", end}, {"step", int64_t(pick(1, 3))}});
  } else {
    Shape to = s;
    for (auto& d : to) if (d == 1) d = pick(1, 3);
    if (chance(0.3)) to.insert(to.begin(), pick(1, 3));
    emit(OpId::expand, {a}, {{"shape", to}});
  }
}

}  // namespace detail

std::unique_ptr<ir::Graph> random_graph(uint64_t seed, const RandomGraphOptions& options) {
  return detail::Builder(seed, options).build();
}

}  // namespace smelt::fuzz
