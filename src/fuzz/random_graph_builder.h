// The random graph generator's builder, shared by random_graph.cpp (the generator loop and the
// ordinary ops) and random_graph_blocks.cpp (the contraction blocks fold_batchnorm rewrites, the
// int64 blocks and the rule baits). Internal to src/fuzz.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "fuzz/random_graph.h"
#include "fuzz/special_values.h"
#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz::detail {

using ops::OpId;

// Ops that take any float tensor and give one of the same shape.
inline constexpr OpId kUnary[] = {OpId::neg,     OpId::exp,  OpId::abs,      OpId::relu,
                                  OpId::sigmoid, OpId::tanh, OpId::silu,     OpId::erf,
                                  OpId::softplus, OpId::leaky_relu, OpId::gelu, OpId::sqrt,
                                  OpId::log,     OpId::clamp, OpId::rsqrt,   OpId::sign,
                                  OpId::dropout};
// Unary ops without attributes.
inline constexpr OpId kPlainUnary[] = {OpId::neg, OpId::exp, OpId::tanh, OpId::sigmoid, OpId::erf, OpId::abs};
inline constexpr OpId kBinary[] = {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::minimum};
inline constexpr OpId kCompare[] = {OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::eq, OpId::ne};
inline constexpr OpId kReduce[] = {OpId::sum, OpId::mean, OpId::amax, OpId::amin};
// Scalars the algebraic rules key on (simplify: x + (-0), x - (+0), x * 1, x / 1, x / 2^k; the
// int64-only x * 0): both zeros, so a rule that confuses them shows.
inline constexpr double kAlgebraicConstants[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 0.25};
inline constexpr int64_t kAlgebraicIntegers[] = {0, 1, -1, 2};
// The share of elements of a graph's constant tensors that are special values (per graph).
inline constexpr double kConstantSpecialProbability[] = {0.0, 0.05, 0.2};
inline constexpr OpId kIntegerBinary[] = {OpId::add, OpId::sub, OpId::mul, OpId::maximum, OpId::minimum};

class Builder {
 public:
  Builder(uint64_t seed, const RandomGraphOptions& o) : rng_(seed), opt_(o), graph_(std::make_unique<ir::Graph>()) {
    special_ = pick_from(kConstantSpecialProbability);
  }

  std::unique_ptr<ir::Graph> build();

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T, size_t N>
  T pick_from(const T (&items)[N]) { return items[size_t(pick(0, int(N) - 1))]; }
  ir::Value* any_value() { return pool_[size_t(pick(0, int(pool_.size()) - 1))]; }
  // Recent values are more likely, so graphs grow deep rather than wide.
  ir::Value* recent_value() {
    int n = int(pool_.size());
    return pool_[size_t(std::max(0, n - 1 - pick(0, std::min(n - 1, 2))))];
  }

  Shape random_shape() {
    Shape s(size_t(pick(0, opt_.max_rank)));
    for (auto& d : s) d = pick(1, opt_.max_dim);
    return s;
  }
  // Drops leading dims and sets some dims to 1.
  Shape broadcastable_to(const Shape& base) {
    Shape s(base.begin() + pick(0, int(base.size()) / 2), base.end());
    for (auto& d : s) if (chance(0.25)) d = 1;
    return s;
  }

  // A 0-dim constant of `dtype`: one the rewrite rules key on, a special value, or an ordinary
  // one. Int64 values are exact (INT64_MAX does not survive a trip through double).
  Tensor scalar_constant(DType dtype) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (dtype == DType::Int64) {
      const int64_t c = r < 0.5 ? pick_from(kAlgebraicIntegers) : r < 0.8 ? special_int64(rng_) : pick(-9, 9);
      return from_vector(std::vector<int64_t>{c}, Shape{});
    }
    const double c = r < 0.55 ? pick_from(kAlgebraicConstants)
                     : r < 0.8 ? special_float(dtype, rng_)
                               : std::uniform_real_distribution<double>(-2, 2)(rng_);
    return scalar_tensor(c, dtype);
  }

  ir::Value* constant_like(const ir::Value* v) {
    if (chance(0.7)) return graph_->add_constant(scalar_constant(v->meta.dtype));
    return graph_->add_constant(
        random_tensor(broadcastable_to(v->meta.shape), v->meta.dtype, {-2, 2, special_}, rng_));
  }

  // An operand for a binary op with `a`: itself (a duplicate edge), a constant, or a value
  // whose shape broadcasts with a's.
  ir::Value* partner(ir::Value* a) {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.2) return a;
    if (r < 0.5) return constant_like(a);
    for (int tries = 0; tries < 6; ++tries) {
      ir::Value* b = any_value();
      try {
        broadcast_shapes(a->meta.shape, b->meta.shape, "fuzz");
        return b;
      } catch (const Error&) {
      }
    }
    return constant_like(a);
  }

  ir::Value* emit(OpId op, const std::vector<ir::Value*>& in, const ops::Attrs& attrs = {}) {
    ir::Node* n = graph_->add_node(op, in, attrs);
    pool_.push_back(n->outputs[0]);
    return n->outputs[0];
  }
  // A node whose result feeds the next one but is not offered to later nodes on its own.
  ir::Value* node(OpId op, const std::vector<ir::Value*>& in, const ops::Attrs& attrs = {}) {
    return graph_->add_node(op, in, attrs)->outputs[0];
  }
  // Elements in [lo, hi], a share of them special values.
  ir::Value* random_constant(const Shape& shape, double lo, double hi, DType dtype) {
    return graph_->add_constant(random_tensor(shape, dtype, {lo, hi, special_}, rng_));
  }
  // Elements in [lo, hi] and nothing else: the constants of a block fold_batchnorm folds. Its
  // rewrite multiplies weights by the batch norm's scale before the sum instead of after, which
  // is exact only up to rounding; with extreme weights or statistics the two orders overflow or
  // cancel differently (inf * 0 on one side, a finite number on the other), a legal difference
  // beyond any rounding tolerance. Special values still reach these blocks through the inputs.
  ir::Value* ordinary_constant(const Shape& shape, double lo, double hi, DType dtype) {
    return graph_->add_constant(random_tensor(shape, dtype, {lo, hi, 0.0}, rng_));
  }
  // Int64 indices in [0, high).
  // Indices in [0, high); `top`: the first one is high - 1.
  ir::Value* index_constant(const Shape& shape, int64_t high, bool top = false) {
    Generator gen(rng_());
    Tensor t = randint(0, high, shape, &gen);
    if (top && t.numel() > 0) t.data<int64_t>()[0] = high - 1;
    return graph_->add_constant(t);
  }
  // A weight-like operand: a constant (foldable) or a new graph input.
  ir::Value* constant_or_input(const Shape& shape, DType dtype) {
    if (chance(0.6)) return random_constant(shape, -2, 2, dtype);
    return graph_->add_input({shape, dtype});
  }
  int64_t random_dim(const Shape& s) { return pick(0, int(s.size()) - 1); }

  void add_random_node();

  void add_unary(ir::Value* a);

  // The same attributes with one float attribute moved by one ulp (or +0 <-> -0): two nodes
  // that CSE must not merge, since it keys on the attributes' exact values.
  std::optional<ops::Attrs> attribute_twin(const ops::Attrs& attrs);

  // clamp's bounds: finite, signed zeros, infinite (inf as a lower bound clamps everything to
  // inf), NaN, or absent (only one bound).
  ops::Attrs clamp_bounds();

  // where(cmp(a, b), a, b), or against a scalar constant with one branch a constant.
  void add_select(ir::Value* a);

  // A reduction over random dims (sometimes keeping them), var, argmax; or a row block.
  void add_reduction(ir::Value* a);
  // A row group's shape (fusion/fuse.h, broadcast epilogue): a reduction with keepdim over the
  // last dim (or the last two) of a prologue of `a`, broadcast back over the rows by an
  // elementwise epilogue that also reads `a` or the prologue: generic, or literally softmax's,
  // log_softmax's or a layer norm's backward rule. `a` is floating.
  void add_row_block(ir::Value* a);
  void add_attention_split(ir::Value* a);
  void add_nll_loss(ir::Value* y);

  // softmax / log_softmax over a random dim, or layer_norm over the last one or two dims; or a
  // row block (their backward rules).
  void add_normalization(ir::Value* a);

  // a @ b with b a vector, a matrix, a batch whose batch dims broadcast against a's, or a's own
  // transpose (a @ a^T); with a 2-D, sometimes a linear layer followed by an eval batch norm.
  void add_matmul(ir::Value* a);

  // Eval-mode batch norm on constant statistics, with constant affine parameters: what
  // fold_batchnorm folds into the weights before it.
  //
  // Tolerance: fold_batchnorm is the one rewrite that changes rounding (conv(x, W * s) instead of
  // (conv(x, W) - mean) * s). Where the conv sum cancels to near zero, that is a large relative
  // error, and a later rsqrt / log / div makes it any size (seed 235330 of an earlier generator:
  // 51.15 vs 51.13). So the contraction + batch norm blocks run in float64 between casts: the
  // fold's float64 rounding is far below one float32 ulp, the results after the cast back agree
  // within the fuzzer's float32 tolerance, and a wrong fold (scale, channel axis, bias) still
  // shows as an O(1) difference.
  // A float64 graph has no wider type: its blocks round through float32 at the end instead (the
  // same margin), and their input is clamped to ±1e30 first, since with inputs near DBL_MAX the
  // two orders overflow differently (inf - inf = NaN on one side, a finite sum on the other: a
  // legal difference of a reassociation, beyond any rounding tolerance; seeds 3528 and 18928).
  static constexpr DType kFoldDType = DType::Float64;
  ir::Value* wide(ir::Value* x);
  ir::Value* narrow(ir::Value* x);

  ir::Value* batch_norm_eval(ir::Value* x);

  // linear(a, W, b) -> batch_norm, as nn::Linear traces: matmul(a, permute(W)) + b.
  void add_linear_batch_norm(ir::Value* a);

  // cat along a random dim of a with a itself (a duplicate edge), a constant of another size
  // along that dim, or a value of the same shape.
  void add_cat(ir::Value* a);

  // index_select or gather along a random dim, with random Int64 index constants: valid ones,
  // and now and then one out of range, which the kernel refuses when the graph runs; fold must
  // then leave the node computed, not fail the compilation (found by smelt fuzz).
  void add_indexing(ir::Value* a);

  // pow with small integer or half-integer exponents (of abs(a) for a fractional one, mostly),
  // special exponents (±0, ±inf, NaN, huge), or any exponent of a base in (0, 1). Results need
  // not be finite: comparisons are bit-exact, NaN matching NaN.
  void add_pow(ir::Value* a);

  // To the other float dtype (a unary or binary op there) and back; to int64 and back
  // (truncation, saturation, NaN -> 0); to bool selecting between a and a partner; or quantized
  // and back (add_quantize_round_trip).
  void add_cast(ir::Value* a);
  // quantize_linear -> dequantize_linear per tensor (uint8 or int8, zero points at the dtype's
  // edges, scales that round at half steps, saturate, or overflow x / s), sometimes concatenated
  // with another value quantized alike (and max-pooled) and quantized again with the same
  // parameters (what sink_dequantize turns into byte ops), sometimes a float op and a second
  // quantization between (what expand_quantize writes out and fusion merges).
  void add_quantize_round_trip(ir::Value* a);

  // op(x, c) with c a scalar the algebraic rules key on (or a special one), and x any value, an
  // input often: where inputs hold -0, inf and NaN, a rule that is wrong only there shows.
  void add_rule_bait();

  // int64 arithmetic from a cast of a (saturating; NaN -> 0) or a new int64 input: wrapping add,
  // sub, mul, neg, abs; maximum / minimum; truncating div by a constant (INT64_MIN / -1 wraps);
  // selects on comparisons; sum / amax / amin; with constants at the int64 extremes and the
  // ones simplify's int64-only rules key on (x * 0, x - x). Back to float32 at the end.
  void add_integer_block(ir::Value* a);

  // A 4-D image (a reshaped to (N, 1, H, W), or a new input) through conv2d (+ bias, + eval
  // batch norm, + relu, as nn::Conv2d / BatchNorm2d / ReLU trace) or a pooling op.
  void add_image_block(ir::Value* a);
  // float32 convs large enough (>= 4096 outputs, >= 8 channels: passes/blocked_layout.cpp) for
  // the blocked channel layout: conv -> relu -> conv, with a residual add, a max pool or a
  // channel cat of two convs now and then; channel counts that are and are not multiples of 16.
  void add_conv_chain();

  void add_view(ir::Value* a);

  std::mt19937_64 rng_;
  RandomGraphOptions opt_;
  std::unique_ptr<ir::Graph> graph_;
  std::vector<ir::Value*> pool_;
  double special_ = 0;  // the share of special elements in this graph's constant tensors
  DType base_dtype_ = DType::Float32;  // the graph inputs' dtype
};

}  // namespace smelt::fuzz::detail
