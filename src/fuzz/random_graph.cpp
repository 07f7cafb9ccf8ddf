#include "fuzz/random_graph.h"

#include <algorithm>
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
                           OpId::gelu, OpId::sqrt,    OpId::log,  OpId::clamp,    OpId::rsqrt};
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
    for (int i = 0; i < nodes; ++i) add_random_node();
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

  void emit(OpId op, const std::vector<ir::Value*>& in, const ops::Attrs& attrs = {}) {
    ir::Node* n = graph_->add_node(op, in, attrs);
    pool_.push_back(n->outputs[0]);
  }

  void add_random_node() {
    ir::Value* a = recent_value();
    const Shape& s = a->meta.shape;
    int kind = pick(0, 9);
    if (kind <= 2) {
      OpId op = pick_from(kUnary);
      ops::Attrs attrs;
      if (op == OpId::leaky_relu) attrs.set("negative_slope", 0.1);
      if (op == OpId::gelu) attrs.set("approximate", int64_t(pick(0, 1)));
      if (op == OpId::softplus) attrs = {{"beta", 1.0}, {"threshold", 20.0}};
      if (op == OpId::clamp) attrs = {{"min", -0.5}, {"max", 1.5}};
      emit(op, {a}, attrs);
    } else if (kind <= 5) {
      ir::Value* b = partner(a);
      if (chance(0.5)) std::swap(a, b);
      emit(pick_from(kBinary), {a, b});
    } else if (kind == 6) {
      ir::Value* b = partner(a);
      ir::Node* cond = graph_->add_node(pick_from(kCompare), {a, b});
      emit(OpId::where, {cond->outputs[0], a, b});
    } else if (kind == 7 && !s.empty()) {
      std::vector<int64_t> dims{pick(0, int(s.size()) - 1)};
      emit(pick_from(kReduce), {a}, {{"dims", dims}, {"keepdim", int64_t(pick(0, 1))}});
    } else {
      add_view(a);
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
      emit(OpId::slice, {a}, {{"dim", d}, {"start", start}, {"end", end}, {"step", int64_t(pick(1, 2))}});
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
