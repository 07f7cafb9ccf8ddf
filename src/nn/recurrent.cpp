// recurrent_layer: one direction of an RNN, LSTM or GRU over a sequence, in smelt ops
// (include/smelt/recurrent.h). The time loop is unrolled: traced, every step is a handful of
// graph nodes the compiler fuses; eager, every step is a GEMM and a few elementwise ops.
#include "smelt/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "smelt/creation.h"
#include "smelt/error.h"
#include "smelt/ops.h"

namespace smelt {
namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

constexpr const char* kActivationNames =
    "Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
    "Softsign, Softplus";

std::vector<RecurrentActivation> default_activations(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::RNN: return {{"Tanh"}};
    case RecurrentCell::LSTM: return {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
    case RecurrentCell::GRU: return {{"Sigmoid"}, {"Tanh"}};
  }
  return {};
}

const char* cell_name(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::RNN: return "RNN";
    case RecurrentCell::LSTM: return "LSTM";
    case RecurrentCell::GRU: return "GRU";
  }
  return "?";
}

Tensor scalar_like(double v, const Tensor& like) {
  return scalar_tensor(v, TensorOptions().dtype(like.dtype()));
}

// Checks a (rows) or (rows, cols) weight; `what` names it in the message.
void check_matrix(const Tensor& t, int64_t rows, int64_t cols, DType dtype, const char* what) {
  SMELT_CHECK(t.defined()) << "recurrent_layer: " << what << " must be defined";
  const Shape want = cols < 0 ? Shape{rows} : Shape{rows, cols};
  SMELT_CHECK(t.shape() == want) << "recurrent_layer: " << what << " must be " << shape_str(want)
                                 << ", got " << shape_str(t.shape());
  SMELT_CHECK(t.dtype() == dtype) << "recurrent_layer: " << what << " is " << dtype_name(t.dtype())
                                  << ", the input is " << dtype_name(dtype);
}

// Gate block k of `gates` (along dim 1 of a (B, gates*H) tensor, or dim 0 of a (gates*H) one).
Tensor block(const Tensor& t, int64_t k, int64_t hidden) {
  return t.slice(t.dim() - 1, k * hidden, (k + 1) * hidden);
}

}  // namespace

int64_t recurrent_gate_count(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::RNN: return 1;
    case RecurrentCell::LSTM: return 4;
    case RecurrentCell::GRU: return 3;
  }
  return 0;
}

bool RecurrentActivation::uses_alpha() const {
  const std::string n = lower(name);
  return n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" || n == "scaledtanh" ||
         n == "hardsigmoid" || n == "elu";
}

bool RecurrentActivation::uses_beta() const {
  const std::string n = lower(name);
  return n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
}

void RecurrentActivation::check() const {
  const std::string n = lower(name);
  const bool known = n == "sigmoid" || n == "tanh" || n == "relu" || n == "softsign" ||
                     n == "softplus" || uses_alpha();
  SMELT_CHECK(known) << "recurrent activation '" << name << "' is not one of " << kActivationNames;
  SMELT_CHECK(!alpha || uses_alpha()) << "recurrent activation " << name << " takes no alpha";
  SMELT_CHECK(!beta || uses_beta()) << "recurrent activation " << name << " takes no beta";
}

Tensor RecurrentActivation::operator()(const Tensor& x) const {
  const std::string n = lower(name);
  if (n == "sigmoid") return sigmoid(x);
  if (n == "tanh") return tanh(x);
  if (n == "relu") return relu(x);
  if (n == "softsign") return x / (abs(x) + 1.0);
  if (n == "softplus") return softplus(x, 1.0, 20.0);
  if (n == "affine") return x * alpha.value_or(1.0) + beta.value_or(0.0);
  if (n == "leakyrelu") return leaky_relu(x, alpha.value_or(0.01));
  if (n == "thresholdedrelu") {
    return where(gt(x, scalar_like(alpha.value_or(1.0), x)), x, zeros_like(x));
  }
  if (n == "scaledtanh") return tanh(x * beta.value_or(1.0)) * alpha.value_or(1.0);
  if (n == "hardsigmoid") return clamp(x * alpha.value_or(0.2) + beta.value_or(0.5), 0.0, 1.0);
  if (n == "elu") {
    const double a = alpha.value_or(1.0);
    return where(gt(x, scalar_like(0, x)), x, (exp(x) - 1.0) * a);
  }
  check();  // throws with the list of valid names
  return x;
}

RecurrentResult recurrent_layer(const Tensor& x, const RecurrentWeights& w, const Tensor& h0,
                                const Tensor& c0, const Tensor& lengths,
                                const RecurrentOptions& opt) {
  const char* name = cell_name(opt.cell);
  SMELT_CHECK(x.defined() && x.dim() == 3)
      << "recurrent_layer (" << name << "): the input must be (sequence, batch, features), got "
      << (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  SMELT_CHECK(dtype_is_floating(x.dtype())) << "recurrent_layer (" << name
                                      << "): the input must be floating point, got "
                                      << dtype_name(x.dtype());
  const int64_t steps = x.size(0), batch = x.size(1), features = x.size(2);
  const int64_t gates = recurrent_gate_count(opt.cell);
  SMELT_CHECK(w.w_hh.defined() && w.w_hh.dim() == 2 && w.w_hh.size(0) % gates == 0)
      << "recurrent_layer (" << name << "): w_hh must be (" << gates << " * hidden, hidden), got "
      << (w.w_hh.defined() ? shape_str(w.w_hh.shape()) : std::string("an undefined tensor"));
  const int64_t hidden = w.w_hh.size(1);
  const DType dt = x.dtype();
  check_matrix(w.w_hh, gates * hidden, hidden, dt, "w_hh");
  check_matrix(w.w_ih, gates * hidden, features, dt, "w_ih");
  if (w.b_ih.defined()) check_matrix(w.b_ih, gates * hidden, -1, dt, "b_ih");
  if (w.b_hh.defined()) check_matrix(w.b_hh, gates * hidden, -1, dt, "b_hh");
  const bool lstm = opt.cell == RecurrentCell::LSTM, gru = opt.cell == RecurrentCell::GRU;
  SMELT_CHECK(lstm || !w.peephole.defined())
      << "recurrent_layer (" << name << "): peephole weights are for LSTM only";
  if (w.peephole.defined()) check_matrix(w.peephole, 3 * hidden, -1, dt, "peephole");
  SMELT_CHECK(lstm || !c0.defined()) << "recurrent_layer (" << name
                                     << "): an initial cell state c0 is for LSTM only";
  SMELT_CHECK(!opt.input_forget || lstm) << "recurrent_layer: input_forget is an LSTM option";
  for (const auto& [t, what] : {std::pair{h0, "h0"}, std::pair{c0, "c0"}}) {
    if (t.defined()) check_matrix(t, batch, hidden, dt, what);
  }
  if (lengths.defined()) {
    SMELT_CHECK(lengths.shape() == Shape{batch} && !dtype_is_floating(lengths.dtype()) &&
                lengths.dtype() != DType::Bool)
        << "recurrent_layer (" << name << "): lengths must be an integer tensor (" << batch
        << "), got " << dtype_name(lengths.dtype()) << " " << shape_str(lengths.shape());
  }
  std::vector<RecurrentActivation> act =
      opt.activations.empty() ? default_activations(opt.cell) : opt.activations;
  const size_t want_acts = default_activations(opt.cell).size();
  SMELT_CHECK(act.size() == want_acts) << "recurrent_layer (" << name << "): " << want_acts
                                       << " activation functions expected, got " << act.size();
  for (const auto& a : act) a.check();
  SMELT_CHECK(!opt.clip || *opt.clip > 0) << "recurrent_layer: clip must be positive";

  auto clipped = [&](const Tensor& t) { return opt.clip ? clamp(t, -*opt.clip, *opt.clip) : t; };

  // The input projection of every step in one GEMM. The recurrent bias joins it, except GRU's
  // new-gate part when it stays inside r * (...).
  Tensor bias = w.b_ih;
  if (w.b_hh.defined()) {
    Tensor b_hh = w.b_hh;
    if (gru && opt.linear_before_reset) {
      b_hh = cat({block(w.b_hh, 0, 2 * hidden), zeros({hidden}, dt)});
    }
    bias = bias.defined() ? bias + b_hh : b_hh;
  }
  Tensor projected = linear(x.reshape({steps * batch, features}), w.w_ih, bias)
                         .reshape({steps, batch, gates * hidden});
  // A GRU in ONNX's default form takes W_hn's product of r * h apart; otherwise one product
  // covers every gate (one GEMV per step).
  const bool split_hn = gru && !opt.linear_before_reset;
  Tensor w_hh = split_hn ? w.w_hh.slice(0, 0, 2 * hidden) : w.w_hh;
  Tensor w_hn = split_hn ? w.w_hh.slice(0, 2 * hidden, 3 * hidden) : Tensor();
  Tensor b_hn = gru && w.b_hh.defined() && opt.linear_before_reset ? block(w.b_hh, 2, hidden)
                                                                   : Tensor();

  // No initial state is a zero state, which the first step's products would only multiply:
  // until a step has run, h (and c) stay undefined and their terms are left out. (So the graph has
  // no (batch, hidden) constant, and a compiled call's batch can be a symbolic dim.)
  Tensor h = h0, c = lstm ? c0 : Tensor();
  const Tensor zero = scalar_like(0, x);  // broadcasts: an output past a sequence's end
  auto recurrent = [&](const Tensor& w_rec) { return matmul(h, w_rec.t()); };
  auto plus = [](const Tensor& a, const Tensor& b) { return b.defined() ? a + b : a; };
  auto times = [](const Tensor& a, const Tensor& b) { return b.defined() ? a * b : Tensor(); };
  // Lengths outside [0, S] are refused wherever they are read (eagerly, or by a compiled plan on
  // every call): each is also an index into S + 1 positions, which index_select checks.
  Tensor len = lengths;
  if (len.defined()) {
    len = len + index_select(zeros({steps + 1}, len.dtype()), 0, len.to(DType::Int64));
  }
  std::vector<Tensor> outputs(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = opt.reverse ? steps - 1 - i : i;
    Tensor xt = projected.select(0, t);
    const bool has_h = h.defined();
    Tensor h_new, c_new;
    if (opt.cell == RecurrentCell::RNN) {
      h_new = act[0](clipped(has_h ? xt + recurrent(w_hh) : xt));
    } else if (lstm) {
      Tensor g = has_h ? xt + recurrent(w_hh) : xt;
      Tensor gi = block(g, 0, hidden), gf = block(g, 1, hidden);
      Tensor gc = block(g, 2, hidden), go = block(g, 3, hidden);
      if (w.peephole.defined()) {
        gi = plus(gi, times(block(w.peephole, 0, hidden), c));
        gf = plus(gf, times(block(w.peephole, 1, hidden), c));
      }
      Tensor in = act[0](clipped(gi));
      Tensor forget = opt.input_forget ? 1.0 - in : act[0](clipped(gf));
      c_new = plus(in * act[1](clipped(gc)), times(forget, c));
      if (w.peephole.defined()) go = go + block(w.peephole, 2, hidden) * c_new;
      h_new = act[0](clipped(go)) * act[2](c_new);
    } else {
      Tensor g = has_h ? recurrent(w_hh) : Tensor();
      Tensor r = act[0](clipped(plus(block(xt, 0, hidden), has_h ? block(g, 0, hidden) : Tensor())));
      Tensor z = act[0](clipped(plus(block(xt, 1, hidden), has_h ? block(g, 1, hidden) : Tensor())));
      Tensor hn;  // undefined: zero
      if (opt.linear_before_reset) {
        hn = plus(has_h ? block(g, 2, hidden) : b_hn, has_h ? b_hn : Tensor());
        if (hn.defined()) hn = r * hn;
      } else if (has_h) {
        hn = matmul(r * h, w_hn.t());
      }
      Tensor n = act[1](clipped(plus(block(xt, 2, hidden), hn)));
      h_new = plus((1.0 - z) * n, times(z, h));
    }
    if (lengths.defined()) {
      // Entries whose sequence has ended (or not begun, in reverse) keep their state and output
      // zeros.
      Tensor running = gt(len, scalar_tensor(t, TensorOptions().dtype(len.dtype())))
                           .unsqueeze(1);
      outputs[size_t(t)] = where(running, h_new, zero);
      h = where(running, h_new, has_h ? h : zero);
      if (lstm) c = where(running, c_new, c.defined() ? c : zero);
    } else {
      outputs[size_t(t)] = h_new;
      h = h_new;
      c = c_new;
    }
  }
  if (!h.defined()) h = zeros({batch, hidden}, dt);  // no step ran
  if (lstm && !c.defined()) c = zeros({batch, hidden}, dt);
  RecurrentResult result;
  result.output = steps > 0 ? stack(outputs, 0) : zeros({0, batch, hidden}, dt);
  result.h = h;
  result.c = c;
  result.steps = std::move(outputs);
  return result;
}

}  // namespace smelt
