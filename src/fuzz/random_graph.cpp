#include "fuzz/random_graph.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz {
namespace {

using ops::OpId;

// Ops that take any float tensor and give one of the same shape.
constexpr OpId kUnary[] = {OpId::neg,  OpId::exp,     OpId::abs,  OpId::relu,     OpId::sigmoid,
                           OpId::tanh, OpId::silu,    OpId::erf,  OpId::softplus, OpId::leaky_relu,
                           OpId::gelu, OpId::sqrt,    OpId::log,  OpId::clamp,    OpId::rsqrt,
                           OpId::sign, OpId::dropout};
// Unary ops without attributes.
constexpr OpId kPlainUnary[] = {OpId::neg, OpId::exp, OpId::tanh, OpId::sigmoid, OpId::erf, OpId::abs};
constexpr OpId kBinary[] = {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::minimum};
constexpr OpId kCompare[] = {OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::eq, OpId::ne};
constexpr OpId kReduce[] = {OpId::sum, OpId::mean, OpId::amax, OpId::amin};
constexpr double kSpecialConstants[] = {0.0, 1.0, -1.0, 2.0, 0.5};

class Builder {
 public:
  Builder(uint64_t seed, const RandomGraphOptions& o) : rng_(seed), opt_(o), graph_(std::make_unique<ir::Graph>()) {}

  std::unique_ptr<ir::Graph> build() {
    Shape base = random_shape();
    int num_inputs = pick(1, 3);
    for (int i = 0; i < num_inputs; ++i) {
      pool_.push_back(graph_->add_input({broadcastable_to(base), DType::Float32}));
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

  ir::Value* constant_like(const ir::Value* v) {
    double c = chance(0.6) ? pick_from(kSpecialConstants) : std::uniform_real_distribution<double>(-2, 2)(rng_);
    if (chance(0.7)) return graph_->add_constant(scalar_tensor(c, v->meta.dtype));
    Generator gen(rng_());
    return graph_->add_constant(uniform(broadcastable_to(v->meta.shape), -2, 2, v->meta.dtype, &gen));
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
  ir::Value* random_constant(const Shape& shape, double lo = -2, double hi = 2,
                             DType dtype = DType::Float32) {
    Generator gen(rng_());
    return graph_->add_constant(uniform(shape, lo, hi, dtype, &gen));
  }
  // Int64 indices in [0, high).
  ir::Value* index_constant(const Shape& shape, int64_t high) {
    Generator gen(rng_());
    return graph_->add_constant(randint(0, high, shape, &gen));
  }
  // A weight-like operand: a constant (foldable) or a new graph input.
  ir::Value* constant_or_input(const Shape& shape, DType dtype = DType::Float32) {
    if (chance(0.6)) return random_constant(shape, -2, 2, dtype);
    return graph_->add_input({shape, dtype});
  }
  int64_t random_dim(const Shape& s) { return pick(0, int(s.size()) - 1); }

  void add_random_node() {
    ir::Value* a = recent_value();
    const Shape& s = a->meta.shape;
    const int kind = pick(0, 39);
    if (kind < 10) {
      add_unary(a);
    } else if (kind < 18) {
      ir::Value* b = partner(a);
      if (chance(0.5)) std::swap(a, b);
      emit(pick_from(kBinary), {a, b});
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
    } else {
      add_view(a);
    }
  }

  void add_unary(ir::Value* a) {
    OpId op = pick_from(kUnary);
    ops::Attrs attrs;
    if (op == OpId::leaky_relu) attrs.set("negative_slope", 0.1);
    if (op == OpId::gelu) attrs.set("approximate", int64_t(pick(0, 1)));
    if (op == OpId::softplus) attrs = {{"beta", 1.0}, {"threshold", 20.0}};
    if (op == OpId::clamp) attrs = {{"min", -0.5}, {"max", 1.5}};
    if (op == OpId::dropout) {  // the identity only: eval mode, or p = 0 (the results stay deterministic)
      attrs = chance(0.5) ? ops::Attrs{{"p", 0.5}, {"training", int64_t(0)}}
                          : ops::Attrs{{"p", 0.0}, {"training", int64_t(1)}};
      // A constant generator state (its last input); the identity draws nothing from it.
      emit(op, {a, graph_->add_constant(generator_state_tensor({0, 0}))}, attrs);
      return;
    }
    emit(op, {a}, attrs);
  }

  // where(cmp(a, b), a, b), or against a scalar constant with one branch a constant.
  void add_select(ir::Value* a) {
    ir::Value* b = chance(0.7) ? partner(a) : constant_like(a);
    ir::Value* cond = node(pick_from(kCompare), {a, b});
    if (chance(0.7)) {
      emit(OpId::where, {cond, a, b});
    } else {
      emit(OpId::where, {cond, constant_like(a), a});
    }
  }

  void add_reduction(ir::Value* a) {
    const Shape& s = a->meta.shape;
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
    } else {  // argmax gives Int64: back to float32 for the nodes after it
      ir::Value* index = node(OpId::argmax, {a}, {{"dim", dims[0]}, {"keepdim", keepdim}});
      emit(OpId::cast, {index}, {{"dtype", DType::Float32}});
    }
  }

  // softmax / log_softmax over a random dim, or layer_norm over the last one or two dims.
  void add_normalization(ir::Value* a) {
    const Shape& s = a->meta.shape;
    const int rank = int(s.size());
    if (chance(0.6)) {
      emit(chance(0.5) ? OpId::softmax : OpId::log_softmax, {a}, {{"dim", int64_t(pick(-rank, rank - 1))}});
      return;
    }
    const int64_t ndim = pick(1, std::min(rank, 2));
    const Shape normalized(s.end() - ndim, s.end());
    emit(OpId::layer_norm, {a, random_constant(normalized, 0.5, 1.5), constant_or_input(normalized)},
         {{"ndim", ndim}, {"eps", 1e-5}});
  }

  // a @ b with b a vector, a matrix, a batch whose batch dims broadcast against a's, or a's own
  // transpose (a @ a^T); with a 2-D, sometimes a linear layer followed by an eval batch norm.
  void add_matmul(ir::Value* a) {
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
    ir::Value* b = constant_or_input(b_shape);
    if (chance(0.2)) {
      emit(OpId::matmul, {b_shape.size() == 1 ? b : a, b_shape.size() == 1 ? a : b});  // also b @ a
    } else {
      emit(OpId::matmul, {a, b});
    }
  }

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
  static constexpr DType kFoldDType = DType::Float64;
  ir::Value* wide(ir::Value* x) { return node(OpId::cast, {x}, {{"dtype", kFoldDType}}); }
  ir::Value* narrow(ir::Value* x) { return node(OpId::cast, {x}, {{"dtype", DType::Float32}}); }

  ir::Value* batch_norm_eval(ir::Value* x) {
    const Shape channels{x->meta.shape[1]};
    const DType dt = x->meta.dtype;
    ir::Node* bn = graph_->add_node(
        OpId::batch_norm,
        {x, random_constant(channels, 0.5, 1.5, dt), random_constant(channels, -1, 1, dt),
         random_constant(channels, -0.5, 0.5, dt), random_constant(channels, 0.25, 2, dt)},
        {{"training", int64_t(0)}, {"momentum", 0.1}, {"eps", 1e-5}});
    return bn->outputs[0];
  }

  // linear(a, W, b) -> batch_norm, as nn::Linear traces: matmul(a, permute(W)) + b.
  void add_linear_batch_norm(ir::Value* a) {
    const int64_t out = pick(1, 4);
    ir::Value* w = random_constant({out, a->meta.shape[1]}, -2, 2, kFoldDType);
    ir::Value* y = node(OpId::matmul, {wide(a), node(OpId::permute, {w}, {{"dims", Shape{1, 0}}})});
    if (chance(0.5)) y = node(OpId::add, {y, random_constant({out}, -2, 2, kFoldDType)});
    ir::Value* bn = batch_norm_eval(y);
    pool_.push_back(narrow(chance(0.5) ? bn : node(OpId::relu, {bn})));
  }

  // cat along a random dim of a with a itself (a duplicate edge), a constant of another size
  // along that dim, or a value of the same shape.
  void add_cat(ir::Value* a) {
    const Shape& s = a->meta.shape;
    const int64_t dim = random_dim(s);
    std::vector<ir::Value*> parts{a};
    for (int i = pick(1, 2); i > 0; --i) {
      const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
      ir::Value* part = a;
      if (r < 0.5) {
        Shape other = s;
        other[size_t(dim)] = pick(1, 3);
        part = random_constant(other);
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

  // index_select or gather along a random dim, with valid random Int64 index constants.
  void add_indexing(ir::Value* a) {
    const Shape& s = a->meta.shape;
    const int64_t dim = random_dim(s);
    if (chance(0.5)) {
      emit(OpId::index_select, {a, index_constant({pick(1, 4)}, s[size_t(dim)])}, {{"dim", dim}});
      return;
    }
    Shape index_shape = s;
    for (size_t d = 0; d < s.size(); ++d) {
      index_shape[d] = int64_t(d) == dim ? pick(1, 4) : pick(1, int(s[d]));
    }
    emit(OpId::gather, {a, index_constant(index_shape, s[size_t(dim)])}, {{"dim", dim}});
  }

  // pow with exponents that stay finite on the inputs' range: small integer or half-integer
  // constants (the simplifier rewrites several of them), or any exponent of a positive base.
  void add_pow(ir::Value* a) {
    constexpr double kExponents[] = {0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1.5};
    if (chance(0.7)) {
      double e = pick_from(kExponents);
      ir::Value* base = e == std::floor(e) ? a : node(OpId::abs, {a});
      emit(OpId::pow, {base, graph_->add_constant(scalar_tensor(e, DType::Float32))});
    } else {
      ir::Value* base = node(OpId::sigmoid, {a});  // in (0, 1)
      emit(OpId::pow, {base, partner(a)});
    }
  }

  // float32 -> float64 (a unary op there) -> float32; -> int64 -> float32 (truncation); or ->
  // bool selecting between a and a partner.
  void add_cast(ir::Value* a) {
    const int which = pick(0, 2);
    if (which == 0) {
      ir::Value* wide = node(OpId::cast, {a}, {{"dtype", DType::Float64}});
      if (chance(0.5)) wide = node(pick_from(kPlainUnary), {wide});
      emit(OpId::cast, {wide}, {{"dtype", DType::Float32}});
    } else if (which == 1) {
      ir::Value* ints = node(OpId::cast, {a}, {{"dtype", DType::Int64}});
      emit(OpId::cast, {ints}, {{"dtype", DType::Float32}});
    } else {
      ir::Value* mask = node(OpId::cast, {a}, {{"dtype", DType::Bool}});
      emit(OpId::where, {mask, a, partner(a)});
    }
  }

  // A 4-D image (a reshaped to (N, 1, H, W), or a new input) through conv2d (+ bias, + eval
  // batch norm, + relu, as nn::Conv2d / BatchNorm2d / ReLU trace) or a pooling op.
  void add_image_block(ir::Value* a) {
    const Shape& s = a->meta.shape;
    ir::Value* x = nullptr;
    if (s.size() == 4) {
      x = a;
    } else if (s.size() >= 2 && s[s.size() - 1] >= 2 && s[s.size() - 2] >= 2) {
      const int64_t h = s[s.size() - 2], w = s.back();
      x = node(OpId::reshape, {a}, {{"shape", Shape{shape_numel(s) / (h * w), 1, h, w}}});
    } else {
      x = graph_->add_input({{pick(1, 2), pick(1, 3), pick(3, 6), pick(3, 6)}, DType::Float32});
    }
    const Shape& xs = x->meta.shape;
    const int64_t k = pick(1, int(std::min<int64_t>(3, std::min(xs[2], xs[3]))));
    const int which = pick(0, 5);
    if (which <= 2) {
      const int64_t channels = xs[1];
      const int64_t groups = channels > 1 && chance(0.3) ? channels : 1;
      const int64_t out = groups * pick(1, 2);
      const bool with_batch_norm = chance(0.6);
      const DType dt = with_batch_norm ? kFoldDType : DType::Float32;
      ir::Value* input = with_batch_norm ? wide(x) : x;
      ir::Value* weight = constant_or_input({out, channels / groups, k, k}, dt);
      const ops::Attrs attrs{{"stride", Shape{pick(1, 2), pick(1, 2)}},
                             {"padding", Shape{pick(0, 1), pick(0, 1)}},
                             {"dilation", Shape{1, pick(1, 2)}},
                             {"groups", groups}};
      ir::Value* y = node(OpId::conv2d, {input, weight}, attrs);
      if (chance(0.5)) {
        ir::Value* bias = node(OpId::reshape, {random_constant({out}, -2, 2, dt)}, {{"shape", Shape{1, out, 1, 1}}});
        y = node(OpId::add, {y, bias});
      }
      if (with_batch_norm) y = batch_norm_eval(y);
      if (chance(0.5)) y = node(OpId::relu, {y});
      pool_.push_back(with_batch_norm ? narrow(y) : y);
    } else if (which == 3) {
      emit(OpId::max_pool2d, {x}, {{"kernel", Shape{k, k}}, {"stride", Shape{pick(1, 2), pick(1, 2)}},
                                   {"padding", Shape{0, k / 2}}, {"dilation", Shape{1, 1}}});
    } else if (which == 4) {
      emit(OpId::avg_pool2d, {x}, {{"kernel", Shape{k, k}}, {"stride", Shape{pick(1, 2), pick(1, 2)}},
                                   {"padding", Shape{k / 2, 0}}, {"count_include_pad", int64_t(pick(0, 1))}});
    } else {
      emit(OpId::adaptive_avg_pool2d, {x}, {{"output_size", Shape{pick(1, 3), pick(1, 3)}}});
    }
  }

  void add_view(ir::Value* a) {
    const Shape& s = a->meta.shape;
    int kind = pick(0, 3);
    if (kind == 0 || s.empty()) {  // reshape: flatten, or split the first dim off
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

  std::mt19937_64 rng_;
  RandomGraphOptions opt_;
  std::unique_ptr<ir::Graph> graph_;
  std::vector<ir::Value*> pool_;
};

}  // namespace

std::unique_ptr<ir::Graph> random_graph(uint64_t seed, const RandomGraphOptions& options) {
  return Builder(seed, options).build();
}

}  // namespace smelt::fuzz
