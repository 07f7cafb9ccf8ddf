#include "fuzz/autograd_fuzzer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <sstream>

#include "fuzz/autograd_program.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "tensor/overlap.h"

namespace smelt::fuzz {
namespace {

constexpr double kMatchTol = 1e-9;                 // (a) vs (b), see the header
constexpr double kEps = 1e-6, kRtol = 1e-4, kAtol = 1e-5;  // finite differences (gradcheck's)
constexpr double kKinkMargin = 1e-3;  // relu/clamp inputs stay this far from the kink

// splitmix64: small, fast, and the same sequence on every platform.
struct ValueRng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return int(next() % uint64_t(n)); }
  bool chance(double p) { return double(next() >> 11) * 0x1.0p-53 < p; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[size_t(below(int(v.size())))]; }
};

Tensor random_values(ValueRng& rng, const Shape& shape, double lo, double hi) {
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = rng.uniform(lo, hi);
  return from_vector(v, shape);
}

// Value facts the generator uses to keep programs smooth and finite.
struct Facts {
  double max_abs = 0, min_abs = INFINITY;
  std::vector<double> values;
};
Facts facts_of(const Tensor& t) {
  Facts f;
  f.values = t.to_vector();
  for (double v : f.values) {
    f.max_abs = std::max(f.max_abs, std::fabs(v));
    f.min_abs = std::min(f.min_abs, std::fabs(v));
  }
  return f;
}
double distance_to(const Facts& f, double point) {
  double d = INFINITY;
  for (double v : f.values) d = std::min(d, std::fabs(v - point));
  return d;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}
bool broadcastable(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// A writable slot: no internal overlap, neither a leaf that requires grad nor a view of one,
// and not memory that a node saved for backward (the write would rightly fail there).
bool writable(const Tensor& t, const std::vector<const Storage*>& saved) {
  const TensorImpl* root = t.impl()->view_base ? t.impl()->view_base.get() : t.impl();
  auto leaf = [](const TensorImpl* i) { return i->requires_grad && !i->grad_fn; };
  return t.numel() > 0 && !has_internal_overlap(t) && !leaf(t.impl()) && !leaf(root) &&
         std::find(saved.begin(), saved.end(), t.storage().get()) == saved.end();
}

// The storages autograd saved while logging was on (see ops::set_saved_storage_log).
class SavedStorages {
 public:
  ~SavedStorages() { off(); }
  void on() { ops::set_saved_storage_log(&log_); }
  void off() { ops::set_saved_storage_log(nullptr); }
  const std::vector<const Storage*>& log() const { return log_; }

 private:
  std::vector<const Storage*> log_;
};

class InPlaceCaseGenerator {
 public:
  InPlaceCaseGenerator(ValueRng& rng, InPlaceRun& a, FunctionalRun& b, const SavedStorages& saved)
      : rng_(rng), a_(a), b_(b), saved_(saved) {}

  std::optional<Step> propose() {
    const int roll = rng_.below(100);
    if (roll < 14) return unary();
    if (roll < 28) return binary();
    if (roll < 52) return view();
    return in_place();
  }

 private:
  int any_slot() { return rng_.below(int(a_.slots.size())); }
  const Shape& shape(int slot) const { return a_.slots[size_t(slot)].shape(); }
  Facts facts(int slot) const { return facts_of(b_.read(slot)); }

  std::optional<Step> unary() {
    Step s;
    s.a = any_slot();
    const Facts f = facts(s.a);
    static const StepKind kinds[] = {StepKind::Neg,   StepKind::Exp,   StepKind::Tanh,
                                     StepKind::Square, StepKind::Scale, StepKind::Shift,
                                     StepKind::SumDim};
    s.kind = kinds[rng_.below(7)];
    if (s.kind == StepKind::Exp && f.max_abs > 3) return std::nullopt;
    if ((s.kind == StepKind::Square || s.kind == StepKind::Scale) && f.max_abs > 30) return std::nullopt;
    if (s.kind == StepKind::Scale) s.c = rng_.pick<double>({-2.0, -0.5, 0.5, 1.5, 3.0});
    if (s.kind == StepKind::Shift) s.c = rng_.uniform(-1, 1);
    if (s.kind == StepKind::SumDim) {
      if (shape(s.a).empty()) return std::nullopt;
      s.ints = {rng_.below(int(shape(s.a).size())), rng_.below(2)};
    }
    return s;
  }

  std::optional<Step> binary() {
    Step s;
    s.a = any_slot();
    s.b = rng_.chance(0.15) ? s.a : any_slot();  // a value used twice now and then
    if (!broadcastable(shape(s.a), shape(s.b))) return std::nullopt;
    static const StepKind kinds[] = {StepKind::Add, StepKind::Sub, StepKind::Mul, StepKind::SafeDiv};
    s.kind = kinds[rng_.below(4)];
    if (s.kind == StepKind::Mul && (facts(s.a).max_abs > 30 || facts(s.b).max_abs > 30)) return std::nullopt;
    return s;
  }

  std::optional<Step> view() {
    Step s;
    s.a = any_slot();
    Shape sh = shape(s.a);
    const int64_t rank = int64_t(sh.size());
    switch (rng_.below(6)) {
      case 5:
        if (rank < 2) return std::nullopt;
        s.kind = StepKind::Diagonal;
        break;
      case 0: {
        if (rank == 0) return std::nullopt;
        int64_t d = rng_.below(int(rank)), n = sh[size_t(d)];
        int64_t start = rng_.below(int(n)), end = start + 1 + rng_.below(int(n - start));
        s.kind = StepKind::Slice;
        s.ints = {d, start, end, 1 + rng_.below(2)};
        break;
      }
      case 1: {
        if (rank < 2) return std::nullopt;
        s.kind = StepKind::Permute;
        s.ints.resize(size_t(rank));
        std::iota(s.ints.begin(), s.ints.end(), 0);
        for (size_t i = s.ints.size() - 1; i > 0; --i) std::swap(s.ints[i], s.ints[size_t(rng_.below(int(i + 1)))]);
        break;
      }
      case 2: {
        s.kind = StepKind::Expand;
        for (int64_t& v : sh) if (v == 1 && rng_.chance(0.5)) v = 2 + rng_.below(2);
        if (rank < 3 && rng_.chance(0.4)) sh.insert(sh.begin(), 2);
        s.ints = sh;
        break;
      }
      case 3: {
        s.kind = StepKind::Reshape;
        const int how = rng_.below(3);
        if (how == 0) {
          s.ints = {shape_numel(sh)};  // flatten
        } else if (how == 1 && rank < 4) {
          sh.insert(sh.begin() + rng_.below(int(rank + 1)), 1);  // unsqueeze
          s.ints = sh;
        } else {
          if (rank < 2) return std::nullopt;  // merge two adjacent dims
          size_t d = size_t(rng_.below(int(rank - 1)));
          sh[d] *= sh[d + 1];
          sh.erase(sh.begin() + long(d) + 1);
          s.ints = sh;
        }
        break;
      }
      default: {
        if (rank == 0) return std::nullopt;
        int64_t d = rng_.below(int(rank));
        s.kind = StepKind::Select;
        s.ints = {d, rng_.below(int(sh[size_t(d)]))};
        break;
      }
    }
    return s;
  }

  std::optional<Step> in_place() {
    std::vector<int> targets;
    for (int i = 0; i < int(a_.slots.size()); ++i) {
      if (writable(a_.slots[size_t(i)], saved_.log())) targets.push_back(i);
    }
    if (targets.empty()) return std::nullopt;
    Step s;
    s.a = rng_.pick(targets);
    const Facts t = facts(s.a);
    static const StepKind kinds[] = {StepKind::AddT, StepKind::SubT,  StepKind::MulT,
                                     StepKind::DivT, StepKind::AddC,  StepKind::MulC,
                                     StepKind::DivC, StepKind::NegI,  StepKind::ExpI,
                                     StepKind::ReluI, StepKind::ClampI, StepKind::CopyI,
                                     StepKind::FillI, StepKind::ZeroI};
    s.kind = kinds[rng_.below(14)];
    if (step_takes_operand(s.kind)) {
      std::vector<int> operands;  // the target itself and views of its memory included
      for (int i = 0; i < int(a_.slots.size()); ++i) {
        if (broadcasts_to(shape(i), shape(s.a))) operands.push_back(i);
      }
      s.b = rng_.pick(operands);
    }
    const Facts o = s.b >= 0 ? facts(s.b) : Facts{};
    switch (s.kind) {
      case StepKind::AddT:
      case StepKind::SubT: s.c = rng_.pick<double>({1.0, 1.0, 0.5, -2.0}); break;
      case StepKind::MulT: if (t.max_abs > 30 || o.max_abs > 30) return std::nullopt; break;
      case StepKind::DivT: if (t.max_abs > 100 || o.min_abs < 0.25) return std::nullopt; break;
      case StepKind::AddC: s.c = rng_.uniform(-1, 1); break;
      case StepKind::MulC: if (t.max_abs > 100) return std::nullopt; s.c = rng_.pick<double>({-1.5, 0.5, 2.0}); break;
      case StepKind::DivC: s.c = rng_.pick<double>({-2.0, 0.5, 4.0}); if (t.max_abs > 100) return std::nullopt; break;
      case StepKind::ExpI: if (t.max_abs > 3) return std::nullopt; break;
      case StepKind::ReluI: if (distance_to(t, 0.0) < kKinkMargin) return std::nullopt; break;
      case StepKind::ClampI:
        s.c = rng_.uniform(-1, 0);
        s.c2 = rng_.uniform(0, 1);
        if (distance_to(t, s.c) < kKinkMargin || distance_to(t, s.c2) < kKinkMargin) return std::nullopt;
        break;
      case StepKind::FillI: s.c = rng_.uniform(-1, 1); break;
      default: break;
    }
    return s;
  }

  ValueRng& rng_;
  InPlaceRun& a_;
  FunctionalRun& b_;
  const SavedStorages& saved_;
};

// Empty when close (|a - b| <= atol + rtol |b|; with rtol < 0 only equal values with the same
// sign of zero; NaN matches NaN), else what differed; clears *bitwise when any element differs
// in its bits.
std::string compare(const Tensor& a, const Tensor& b, double rtol, double atol, bool* bitwise,
                    const std::string& what) {
  if (a.shape() != b.shape()) {
    return what + ": shape " + shape_str(a.shape()) + " vs " + shape_str(b.shape());
  }
  std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (bitwise && std::memcmp(&x[i], &y[i], sizeof(double)) != 0) *bitwise = false;
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    const bool exact = x[i] == y[i] && std::signbit(x[i]) == std::signbit(y[i]);
    if (exact || (rtol >= 0 && std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) continue;
    std::ostringstream os;
    os.precision(17);
    os << what << ": element " << i << " is " << x[i] << " vs " << y[i];
    return os.str();
  }
  return "";
}

Tensor weighted_sum(const std::vector<Tensor>& outs, const std::vector<Tensor>& weights) {
  Tensor total;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor term = sum(outs[k] * weights[k]);
    total = total.defined() ? total + term : term;
  }
  return total;
}

// d loss / d inputs, zeros where the loss does not depend on an input (or on nothing at all:
// a program may overwrite every path from the inputs with constants).
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& inputs, bool create_graph) {
  std::vector<Tensor> g(inputs.size());
  if (loss.requires_grad()) g = autograd::grad({loss}, inputs, {}, false, create_graph, true);
  for (size_t k = 0; k < g.size(); ++k) {
    if (!g[k].defined()) g[k] = zeros(inputs[k].shape(), DType::Float64);
  }
  return g;
}

// The first failing check's message, or empty.
std::string run_case(uint64_t seed, const AutogradFuzzOptions& opt, AutogradCaseResult* result) {
  ValueRng rng{seed};
  // Input shapes: a common full shape with some dims set to 1 or dropped, so they broadcast.
  Shape full_shape;
  // Rank 0 now and then; mostly 1..max_rank, so views and broadcasting have room.
  for (int d = rng.chance(0.1) ? 0 : 1 + rng.below(opt.max_rank); d > 0; --d) {
    full_shape.push_back(1 + rng.below(opt.max_dim));
  }
  std::vector<Tensor> inputs;
  for (int k = 1 + rng.below(opt.max_inputs); k > 0; --k) {
    Shape sh = full_shape;
    if (rng.chance(0.3)) sh.erase(sh.begin(), sh.begin() + rng.below(int(sh.size()) + 1));
    for (int64_t& v : sh) if (rng.chance(0.15)) v = 1;
    inputs.push_back(random_values(rng, sh, -1.5, 1.5).set_requires_grad());
  }

  InPlaceRun a{inputs};
  FunctionalRun b(inputs);
  SavedStorages saved;  // what (a)'s nodes saved; (b)'s storages are not (a)'s
  InPlaceCaseGenerator gen(rng, a, b, saved);
  std::vector<Step> program;
  std::ostringstream text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    text << "%" << i << " = input " << shape_str(inputs[i].shape()) << "\n";
  }
  const int steps = 2 + rng.below(std::max(1, opt.max_steps - 1));
  for (int i = 0, tries = 0; i < steps && tries < 20 * steps; ++tries) {
    std::optional<Step> s = gen.propose();
    if (!s) continue;
    const int new_slot = int(a.slots.size());
    result->program = text.str() + step_text(*s, new_slot) + "\n";  // in case the step throws
    saved.on();
    a.run(*s);
    saved.off();
    if (s->kind == StepKind::Reshape) {
      s->copies = a.slots.back().storage() != a.slots[size_t(s->a)].storage();
    }
    text << step_text(*s, new_slot) << "\n";
    b.run(*s);
    result->in_place_ops += step_is_in_place(s->kind);
    program.push_back(*s);
    ++i;
  }
  // Several outputs, the newest slots (and in-place targets) more likely.
  std::vector<int> outputs;
  for (int k = 1 + rng.below(3); k > 0; --k) {
    int n = int(a.slots.size());
    outputs.push_back(rng.chance(0.5) ? n - 1 - rng.below(std::min(n, 3)) : rng.below(n));
  }
  std::vector<Tensor> outs_a, outs_b, weights;
  for (int o : outputs) {
    outs_a.push_back(a.slots[size_t(o)]);
    outs_b.push_back(b.read(o));
    weights.push_back(random_values(rng, outs_a.back().shape(), 0.5, 1.5));
    text << "output %" << o << "\n";
  }
  result->program = text.str();

  bool* bitwise = &result->bitwise;
  for (size_t k = 0; k < outs_a.size(); ++k) {
    // The same arithmetic on the same values: exactly equal.
    std::string d = compare(outs_a[k], outs_b[k], /*rtol=*/-1, 0, bitwise,
                            "forward, output " + std::to_string(k));
    if (!d.empty()) return d;
  }
  Tensor loss_a = weighted_sum(outs_a, weights), loss_b = weighted_sum(outs_b, weights);
  const bool second_order = rng.chance(0.25);
  std::vector<Tensor> ga = gradients(loss_a, inputs, second_order);
  std::vector<Tensor> gb = gradients(loss_b, inputs, second_order);
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string d = compare(ga[k], gb[k], kMatchTol, kMatchTol, bitwise,
                            "gradient of input " + std::to_string(k) + ", (a) vs (b)");
    if (!d.empty()) return d;
  }
  if (second_order) {
    std::vector<Tensor> va, vb;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Tensor v = random_values(rng, inputs[k].shape(), 0.5, 1.5);
      va.push_back(ga[k] * v);
      vb.push_back(gb[k] * v);
    }
    const std::vector<Tensor> ones(va.size(), scalar_tensor(1.0, DType::Float64));
    std::vector<Tensor> gga = gradients(weighted_sum(va, ones), inputs, false);
    std::vector<Tensor> ggb = gradients(weighted_sum(vb, ones), inputs, false);
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::string d = compare(gga[k], ggb[k], kMatchTol, kMatchTol, bitwise,
                              "second-order gradient of input " + std::to_string(k));
      if (!d.empty()) return d;
    }
  }

  // Central finite differences of the in-place program itself.
  auto loss_at = [&](const std::vector<Tensor>& xs) {
    NoGradGuard no_grad;
    InPlaceRun run{xs};
    for (const Step& s : program) run.run(s);
    std::vector<Tensor> outs;
    for (int o : outputs) outs.push_back(run.slots[size_t(o)]);
    return weighted_sum(outs, weights).item();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<double> numeric(size_t(inputs[k].numel()));
    std::vector<double> base = inputs[k].to_vector();
    for (size_t i = 0; i < numeric.size(); ++i) {
      std::vector<Tensor> xs;
      for (const Tensor& x : inputs) xs.push_back(x.detach().clone());
      std::vector<double> p = base;
      p[i] += kEps;
      xs[k] = from_vector(p, inputs[k].shape());
      double fp = loss_at(xs);
      p[i] = base[i] - kEps;
      xs[k] = from_vector(p, inputs[k].shape());
      double fm = loss_at(xs);
      numeric[i] = (fp - fm) / (2 * kEps);
    }
    std::string d = compare(ga[k], from_vector(numeric, inputs[k].shape()),
                            kRtol, kAtol, nullptr,
                            "gradient of input " + std::to_string(k) + ", (a) vs finite differences");
    if (!d.empty()) return d;
  }
  return "";
}

}  // namespace

AutogradCaseResult check_autograd_program(uint64_t seed, const AutogradFuzzOptions& options) {
  AutogradCaseResult result;
  try {
    result.message = run_case(seed, options, &result);
  } catch (const std::exception& e) {
    result.message = std::string("error: ") + e.what();
  }
  result.passed = result.message.empty();
  return result;
}

}  // namespace smelt::fuzz
