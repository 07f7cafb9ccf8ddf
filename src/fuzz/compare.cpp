#include "fuzz/compare.h"

#include <unordered_map>

#include "ops/dispatch.h"

#include "trace/interpreter.h"

#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_set>

#include "fuzz/special_values.h"
#include "ir/constant.h"
#include "passes/pass_manager.h"
#include "smelt/ops.h"

namespace smelt::fuzz {
namespace {

// ---------------------------------------------------------------------------------------------
// The comparison rule: when does an optimized graph give "the same" result?
//
// Eager vs interpreter, and optimized vs interpreter: BIT-EXACT, per element, by dtype:
//   - float32 / float64: the same bits, except that any NaN matches any NaN (IEEE leaves the
//     payload and sign of a computed NaN open, and which operand's NaN an op propagates is not
//     something a pass must preserve). So +0 vs -0 is a failure, inf vs DBL_MAX is a failure,
//     a subnormal vs 0 is a failure.
//   - int64 and bool: equal (int64 compared as integers, never through double).
// A pass that changes a result bit is a wrong pass, unless it is listed in kRoundingPasses.
//
// Why bit-exact is the right bar: every pass in src/passes/ except fold_batchnorm computes the
// same arithmetic in the same order:
//   dce, cse            remove or merge; cse merges constants only when dtype and bits match
//   canonicalize        swaps operands of ops flagged commutative; each is commutative bit for
//                       bit (maximum(-0, +0) = maximum(+0, -0) = +0; NaN propagates either way)
//   fold                runs the op's own kernel on the constants: the same function on the same
//                       values (no float64 detour)
//   simplify            rules that are exact for every input (see its header: x + (-0), x * 1,
//                       x / 2^k -> x * 2^-k, int64-only x * 0 and x - x, view chains)
//   transpose_sink,     move and merge views; elementwise ops commute exactly with a permute
//   transpose_normalize
// One caveat, a property of the kernels rather than of a pass: reductions and contractions (sum,
// mean, var, softmax, matmul, conv, pools) accumulate in an order chosen by their operand's
// strides (kernels/reduce_core.h reads any layout in place: contiguous runs with lane-parallel
// row sums, column blocks, or element by element). The same logical values in another layout can
// round differently, and the passes above legally change layouts: transpose_sink turns
// sum(mul(permute(x), c)) into sum(permute(mul(x, c'))), a strided view where the unoptimized
// graph reduced a fresh contiguous tensor; fold materializes views as contiguous constants (seed
// 7006516 with --max-nodes 30 --max-dim 12 --max-rank 4: var over float64 differed in the last
// bit). So when outputs differ, both graphs run again with every reduction's and contraction's
// float operands made contiguous first (with_contiguous_operands); if they then match bit for
// bit, and differed before only within the rounding tolerance, the difference was only the
// accumulation order and the case passes (counted as layout_rounding). A wrong pass still differs
// after that, and a kernel wrong on strided operands differs by more than rounding.
// fold_batchnorm rewrites (conv(x, W) + b - mean) * s + beta as conv(x, W * s) + b': the same
// real number, rounded differently (a reassociation). Outputs that depend on a batch_norm it may
// fold are compared with a TOLERANCE: |got - want| <= kAtol + kRtol |want|, NaN matching NaN,
// an infinity matching only the same infinity, the sign of zero not checked. The generator runs
// those blocks in float64 and rounds their results to float32, so the rounding change stays far
// below the tolerance (the CLI reports how many tolerant outputs were not bit-equal); it keeps
// their inputs where the two orders cannot overflow differently (random_graph_blocks.cpp, wide()).
// ---------------------------------------------------------------------------------------------

// Passes that may legally change an output's rounding, and the op whose results (and everything
// computed from them) they may change.
struct RoundingPass {
  const char* pass;
  ops::OpId op;
};
// blocked_layout runs float32 convs through oneDNN on blocked channels where the plain graph may
// take another implementation (im2col + GEMM, the depthwise kernels): the same sums in another
// order.
constexpr RoundingPass kRoundingPasses[] = {{"fold_batchnorm", ops::OpId::batch_norm},
                                            {"blocked_layout", ops::OpId::conv2d}};

// A share of the cases has no special values at all (ordinary numerics stay tested); the others
// draw each input element special with this probability.
constexpr double kInputSpecialProbability[] = {0.0, 0.05, 0.2, 0.5};

// An input as a non-contiguous view: a transposed buffer (rank >= 2) or every other element of
// a longer one (rank 1). Kernels then read strided operands where the optimized graph may read
// contiguous ones (fold materializes constants, the transpose passes move permutes), so a kernel
// whose result depends on the layout shows.
Tensor strided_input(const Shape& shape, DType dtype, const ElementDraw& draw, std::mt19937_64& rng) {
  const size_t rank = shape.size();
  if (rank >= 2) {
    Shape reversed(shape.rbegin(), shape.rend()), dims;
    for (size_t i = 0; i < rank; ++i) dims.push_back(int64_t(rank - 1 - i));
    return permute(random_tensor(reversed, dtype, draw, rng), dims);
  }
  if (rank == 1) return slice(random_tensor({2 * shape[0]}, dtype, draw, rng), 0, 0, 2 * shape[0], 2);
  return random_tensor(shape, dtype, draw, rng);
}

// One element as text: floats with enough digits to tell neighbours apart and zero's sign.
std::string element_str(const char* p, DType dtype) {
  std::ostringstream os;
  os.precision(17);
  if (dtype == DType::Float32) {
    float f;
    std::memcpy(&f, p, sizeof f);
    if (f == 0 && std::signbit(f)) os << "-0";
    else os << double(f);
  } else if (dtype == DType::Float64) {
    double d;
    std::memcpy(&d, p, sizeof d);
    if (d == 0 && std::signbit(d)) os << "-0";
    else os << d;
  } else if (dtype == DType::Int64) {
    int64_t i;
    std::memcpy(&i, p, sizeof i);
    os << i;
  } else if (dtype == DType::Int32) {
    int32_t i;
    std::memcpy(&i, p, sizeof i);
    os << i;
  } else {
    os << int(static_cast<unsigned char>(*p));
  }
  return os.str();
}

template <class T>
bool float_matches(const char* a, const char* b, bool tolerant) {
  T x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (!tolerant) return std::memcmp(a, b, sizeof x) == 0;
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs(double(x) - double(y)) <= kAtol + kRtol * std::fabs(double(y));
}

bool element_matches(const char* a, const char* b, DType dtype, bool tolerant) {
  if (dtype == DType::Float32) return float_matches<float>(a, b, tolerant);
  if (dtype == DType::Float64) return float_matches<double>(a, b, tolerant);
  return std::memcmp(a, b, dtype_size(dtype)) == 0;  // integers and bools: exact
}

}  // namespace

// For each output of `g`: may a rounding-changing pass of `pipeline` reach it?
std::vector<bool> outputs_with_tolerance(const ir::Graph& g, const std::string& pipeline) {
  std::set<ops::OpId> rounding_ops;
  for (const passes::PassInfo* p : passes::parse_pipeline(pipeline)) {
    for (const RoundingPass& r : kRoundingPasses) {
      if (std::string(p->name) == r.pass) rounding_ops.insert(r.op);
    }
  }
  std::unordered_set<const ir::Value*> reached;
  for (const auto& n : g.nodes()) {  // in topological order
    bool hit = rounding_ops.count(n->op) > 0;
    for (const ir::Value* in : n->inputs) hit |= reached.count(in) > 0;
    if (hit) reached.insert(n->outputs.begin(), n->outputs.end());
  }
  std::vector<bool> tolerant;
  for (const ir::Value* v : g.outputs()) tolerant.push_back(reached.count(v) > 0);
  return tolerant;
}

// `g` with a contiguous copy inserted before every floating operand of a reduction, contraction
// or opaque op (softmax, norms, pools): their accumulation order then depends on the logical
// shape only.
std::unique_ptr<ir::Graph> with_contiguous_operands(const ir::Graph& g) {
  auto out = g.clone();
  std::vector<ir::Node*> order;
  for (const auto& n : out->nodes()) order.push_back(n.get());
  for (ir::Node* n : order) {
    const ops::OpKind kind = ops::op_info(n->op).kind;
    if (n->body) {  // a fusion group: the same inside its body
      n->body = with_contiguous_operands(*n->body);
      continue;
    }
    if (n->op == ops::OpId::contiguous ||
        !(kind == ops::OpKind::Reduce || kind == ops::OpKind::Contraction || kind == ops::OpKind::Opaque)) {
      continue;
    }
    for (size_t k = 0; k < n->inputs.size(); ++k) {
      if (!dtype_is_floating(n->inputs[k]->meta.dtype)) continue;
      ir::Node* copy = out->insert_node(n, ops::OpId::contiguous, {n->inputs[k]}, {});
      out->set_input(n, int(k), copy->outputs[0]);
    }
  }
  return out;
}

std::vector<Tensor> random_inputs(const ir::Graph& g, uint64_t seed, std::optional<double> special) {
  std::mt19937_64 rng(seed);
  ElementDraw draw;
  draw.special = kInputSpecialProbability[std::uniform_int_distribution<int>(0, 3)(rng)];
  if (special) draw.special = *special;
  std::vector<Tensor> inputs;
  for (const ir::Value* v : g.inputs()) {
    ElementDraw d = draw;
    if (v->meta.dtype == DType::Int64) d.low = -10, d.high = 10;
    const bool strided = std::bernoulli_distribution(0.3)(rng);
    inputs.push_back(strided ? strided_input(v->meta.shape, v->meta.dtype, d, rng)
                             : random_tensor(v->meta.shape, v->meta.dtype, d, rng));
  }
  return inputs;
}

// Empty when every output matches by the rule above, else a description of the first difference.
// `tolerant[i]` selects the tolerance for output i (empty: all bit-exact).
// `*rounded` counts the tolerant outputs that matched only within the tolerance.
std::string compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what,
                    const std::vector<bool>& tolerant, int* rounded) {
  if (got.size() != want.size()) return std::string(what) + ": different number of outputs";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape() != want[i].shape() || got[i].dtype() != want[i].dtype()) {
      return std::string(what) + ": output " + std::to_string(i) + " is " + dtype_name(got[i].dtype()) +
             shape_str(got[i].shape()) + ", expected " + dtype_name(want[i].dtype()) + shape_str(want[i].shape());
    }
    const bool tol = !tolerant.empty() && tolerant[i];
    const DType dt = got[i].dtype();
    const size_t size = dtype_size(dt);
    std::string a = ir::constant_bytes(got[i]), b = ir::constant_bytes(want[i]);
    bool bits_differ = false;
    for (size_t off = 0; off < a.size(); off += size) {
      bits_differ |= tol && !element_matches(a.data() + off, b.data() + off, dt, false);
      if (element_matches(a.data() + off, b.data() + off, dt, tol)) continue;
      return std::string(what) + ": output " + std::to_string(i) + " element " + std::to_string(off / size) +
             " is " + element_str(a.data() + off, dt) + ", expected " + element_str(b.data() + off, dt) +
             (tol ? " (within tolerance)" : " (bit-exact)");
    }
    if (bits_differ && rounded) ++*rounded;
  }
  return "";
}

std::vector<Tensor> call_graph(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  std::unordered_map<const ir::Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i];
  for (const ir::Value* c : g.constants()) env[c] = c->constant;
  for (const auto& n : g.nodes()) {
    std::vector<Tensor> args;
    for (const ir::Value* v : n->inputs) args.push_back(env.at(v));
    // A slice as a user's x[a:b] (Tensor::slice clamps to the dim, the op does not): at another
    // batch size (second_batch.h) x[:7] is x[:1] at batch 1, a no-op at batch 5, 7 rows at 13.
    std::vector<Tensor> outs =
        n->op == ops::OpId::slice
            ? std::vector<Tensor>{args[0].slice(n->attrs.get_int("dim"), n->attrs.get_int("start"),
                                                n->attrs.get_int("end"), n->attrs.get_int("step"))}
            : ops::call(n->op, args, n->attrs);
    for (size_t k = 0; k < outs.size(); ++k) env[n->outputs[k]] = outs[k];
  }
  std::vector<Tensor> results;
  for (const ir::Value* v : g.outputs()) results.push_back(env.at(v));
  return results;
}

bool is_reordering(ops::OpId op) {
  using ops::OpId;
  return op == OpId::sum || op == OpId::mean || op == OpId::softmax || op == OpId::log_softmax ||
         op == OpId::layer_norm;
}

std::vector<bool> outputs_reached_by_lowered_reductions(const ir::Graph& g) {
  std::unordered_set<const ir::Value*> reached;
  for (const auto& n : g.nodes()) {  // in topological order
    bool hit = false;
    if (n->body) {
      for (const auto& m : n->body->nodes()) hit |= is_reordering(m->op);
    }
    for (const ir::Value* in : n->inputs) hit |= reached.count(in) > 0;
    if (hit) reached.insert(n->outputs.begin(), n->outputs.end());
  }
  std::vector<bool> out;
  for (const ir::Value* v : g.outputs()) out.push_back(reached.count(v) > 0);
  return out;
}

}  // namespace smelt::fuzz
