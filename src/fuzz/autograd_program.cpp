#include "fuzz/autograd_program.h"

#include <sstream>

#include "fuzz/custom_view.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz {

bool step_is_view(StepKind k) { return k >= StepKind::Slice && k <= StepKind::Diagonal; }
bool step_is_in_place(StepKind k) { return k >= StepKind::AddT; }
bool step_takes_operand(StepKind k) {
  return (k >= StepKind::Add && k <= StepKind::SafeDiv) ||
         (k >= StepKind::AddT && k <= StepKind::DivT) || k == StepKind::CopyI;
}

namespace {

const char* kind_name(StepKind k) {
  static const char* names[] = {"neg",     "exp",   "tanh",   "square", "scale",  "shift",
                                "sum",     "add",   "sub",    "mul",    "safe_div", "slice",
                                "permute", "expand", "reshape", "select", "diagonal", "add_",  "sub_",
                                "mul_",    "div_",  "add_",   "mul_",   "div_",   "neg_",
                                "exp_",    "relu_", "clamp_", "copy_",  "fill_",  "zero_"};
  return names[size_t(k)];
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

Tensor apply_functional(const Step& s, const Tensor& a, const Tensor& b) {
  switch (s.kind) {
    case StepKind::Neg: return neg(a);
    case StepKind::Exp: return exp(a);
    case StepKind::Tanh: return tanh(a);
    case StepKind::Square: return a * a;
    case StepKind::Scale: return a * s.c;
    case StepKind::Shift: return a + s.c;
    case StepKind::SumDim: return sum(a, {s.ints[0]}, s.ints[1] != 0);
    case StepKind::Add: return a + b;
    case StepKind::Sub: return a - b;
    case StepKind::Mul: return a * b;
    case StepKind::SafeDiv: return a / (b * b + 1.0);
    default: break;
  }
  SMELT_INTERNAL_CHECK(false) << "autograd fuzzer: not a functional step";
  return {};
}

Tensor apply_view(const Step& s, const Tensor& a) {
  switch (s.kind) {
    case StepKind::Diagonal: return diagonal_view_op()({a})[0];
    case StepKind::Slice: return a.slice(s.ints[0], s.ints[1], s.ints[2], s.ints[3]);
    case StepKind::Permute: return a.permute(s.ints);
    case StepKind::Expand: return a.expand(s.ints);
    case StepKind::Reshape: return a.reshape(s.ints);
    case StepKind::Select: return a.select(s.ints[0], s.ints[1]);
    default: break;
  }
  SMELT_INTERNAL_CHECK(false) << "autograd fuzzer: not a view step";
  return {};
}

// The in-place method, as a user writes it.
void apply_method(const Step& s, Tensor& t, const Tensor& o) {
  switch (s.kind) {
    case StepKind::AddT: t.add_(o, s.c); return;
    case StepKind::SubT: t.sub_(o, s.c); return;
    case StepKind::MulT: t.mul_(o); return;
    case StepKind::DivT: t.div_(o); return;
    case StepKind::AddC: t.add_(s.c); return;
    case StepKind::MulC: t.mul_(s.c); return;
    case StepKind::DivC: t.div_(s.c); return;
    case StepKind::NegI: t.neg_(); return;
    case StepKind::ExpI: t.exp_(); return;
    case StepKind::ReluI: t.relu_(); return;
    case StepKind::ClampI: t.clamp_(s.c, s.c2); return;
    case StepKind::CopyI: t.copy_(o); return;
    case StepKind::FillI: t.fill_(s.c); return;
    case StepKind::ZeroI: t.zero_(); return;
    default: break;
  }
  SMELT_INTERNAL_CHECK(false) << "autograd fuzzer: not an in-place step";
}

// The value the in-place method leaves in `t`, as a user writes it without in-place ops.
Tensor functional_form(const Step& s, const Tensor& t, const Tensor& o) {
  switch (s.kind) {
    case StepKind::AddT: return s.c == 1.0 ? t + o : t + o * s.c;
    case StepKind::SubT: return s.c == 1.0 ? t - o : t - o * s.c;
    case StepKind::MulT: return t * o;
    case StepKind::DivT: return t / o;
    case StepKind::AddC: return t + s.c;
    case StepKind::MulC: return t * s.c;
    case StepKind::DivC: return t / s.c;
    case StepKind::NegI: return neg(t);
    case StepKind::ExpI: return exp(t);
    case StepKind::ReluI: return relu(t);
    case StepKind::ClampI: return clamp(t, s.c, s.c2);
    case StepKind::CopyI: return o.expand(t.shape());
    case StepKind::FillI: return full(t.shape(), s.c, t.dtype());
    case StepKind::ZeroI: return zeros(t.shape(), t.dtype());
    default: break;
  }
  SMELT_INTERNAL_CHECK(false) << "autograd fuzzer: not an in-place step";
  return {};
}

}  // namespace

std::string step_text(const Step& s, int new_slot) {
  std::ostringstream os;
  // (std::string("%") += ..., not "%" + std::to_string(i): g++ 12 warns falsely (-Wrestrict) on
  // the latter.)
  auto slot = [](int i) { return std::string("%") += std::to_string(i); };
  if (step_is_in_place(s.kind)) {
    os << slot(s.a) << "." << kind_name(s.kind) << "(";
    const char* sep = "";
    if (s.b >= 0) { os << slot(s.b); sep = ", "; }
    if (s.kind == StepKind::AddT || s.kind == StepKind::SubT) os << sep << "alpha " << s.c;
    if (s.kind == StepKind::AddC || s.kind == StepKind::MulC || s.kind == StepKind::DivC ||
        s.kind == StepKind::FillI) {
      os << s.c;
    }
    if (s.kind == StepKind::ClampI) os << s.c << ", " << s.c2;
    os << ")";
    return os.str();
  }
  os << slot(new_slot) << " = " << kind_name(s.kind) << "(" << slot(s.a);
  if (s.b >= 0) os << ", " << slot(s.b);
  if (s.kind == StepKind::Scale || s.kind == StepKind::Shift) os << ", " << s.c;
  if (!s.ints.empty()) os << ", " << ints_text(s.ints);
  os << ")";
  if (s.kind == StepKind::Reshape) os << (s.copies ? "  (a copy)" : "  (a view)");
  return os.str();
}

void InPlaceRun::run(const Step& s) {
  const Tensor b = s.b >= 0 ? slots[size_t(s.b)] : Tensor();
  if (step_is_in_place(s.kind)) {
    apply_method(s, slots[size_t(s.a)], b);
  } else if (step_is_view(s.kind)) {
    slots.push_back(apply_view(s, slots[size_t(s.a)]));
  } else {
    slots.push_back(apply_functional(s, slots[size_t(s.a)], b));
  }
}

FunctionalRun::FunctionalRun(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) slots_.push_back({int(i), {}, inputs[i]});
}

Tensor FunctionalRun::read(int slot) const {
  const Slot& s = slots_[size_t(slot)];
  Tensor v = slots_[size_t(s.root)].value;
  for (const Step& step : s.chain) v = apply_view(step, v);
  return v;
}

void FunctionalRun::run(const Step& s) {
  const int next = int(slots_.size());
  if (step_is_in_place(s.kind)) {
    write(s.a, functional_form(s, read(s.a), s.b >= 0 ? read(s.b) : Tensor()));
  } else if (step_is_view(s.kind) && !s.copies) {
    Slot view = slots_[size_t(s.a)];
    view.chain.push_back(s);
    view.value = Tensor();
    slots_.push_back(std::move(view));
  } else if (step_is_view(s.kind)) {
    slots_.push_back({next, {}, apply_view(s, read(s.a))});
  } else {
    slots_.push_back({next, {}, apply_functional(s, read(s.a), s.b >= 0 ? read(s.b) : Tensor())});
  }
}

// root := where(region, value gathered to the root's positions, root). The region and the
// positions come from replaying the view's steps on the root's element indices.
void FunctionalRun::write(int slot, const Tensor& value) {
  Slot& root = slots_[size_t(slots_[size_t(slot)].root)];
  const std::vector<Step>& chain = slots_[size_t(slot)].chain;
  if (chain.empty()) {
    root.value = value;
    return;
  }
  const Shape root_shape = root.value.shape();
  const int64_t n = shape_numel(root_shape);
  Tensor index = arange(0.0, double(n), 1.0, DType::Float64).reshape(root_shape);
  for (const Step& step : chain) index = apply_view(step, index);
  std::vector<double> position = index.to_vector();
  std::vector<int64_t> source(size_t(n), 0);
  Tensor region = zeros(root_shape, DType::Bool);
  bool* in_region = region.data<bool>();
  for (size_t k = 0; k < position.size(); ++k) {
    const auto at = size_t(position[k]);
    source[at] = int64_t(k);
    in_region[at] = true;
  }
  Tensor gathered = index_select(value.reshape({-1}), 0, from_vector(source, {n}));
  root.value = where(region, gathered.reshape(root_shape), root.value);
}

}  // namespace smelt::fuzz
