// recurrent_layer and nn::RNN / LSTM / GRU against a naive reference written here from the
// equations (scalar loops in double), finite differences, and the compiled path.
#include <cmath>
#include <functional>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::random_leaf;
using testing::random_tensor;

using Fn = std::function<double(double)>;
double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct RefOptions {
  RecurrentCell cell = RecurrentCell::LSTM;
  bool reverse = false, linear_before_reset = true, input_forget = false;
  double clip = 0;  // 0: none
  Fn f = sigm, g = [](double v) { return std::tanh(v); }, h = [](double v) { return std::tanh(v); };
};

struct Ref {
  std::vector<double> y, h, c;
};

// The equations, one scalar at a time. Weights in PyTorch's gate order; v(t) reads a tensor's
// values (empty when undefined).
Ref reference(const Tensor& x, const RecurrentWeights& w, const Tensor& h0, const Tensor& c0,
              const std::vector<int64_t>& lengths, const RefOptions& o) {
  auto v = [](const Tensor& t) { return t.defined() ? t.to_vector() : std::vector<double>{}; };
  const int64_t S = x.size(0), B = x.size(1), I = x.size(2), H = w.w_hh.size(1);
  const std::vector<double> xv = v(x), wi = v(w.w_ih), wh = v(w.w_hh), bi = v(w.b_ih),
                            bh = v(w.b_hh), p = v(w.peephole);
  std::vector<double> h = h0.defined() ? v(h0) : std::vector<double>(size_t(B * H), 0.0);
  std::vector<double> c = c0.defined() ? v(c0) : std::vector<double>(size_t(B * H), 0.0);
  std::vector<double> y(size_t(S * B * H), 0.0);
  auto clip = [&](double a) { return o.clip > 0 ? std::clamp(a, -o.clip, o.clip) : a; };
  // Row r of the input and recurrent products for batch entry b.
  auto xw = [&](int64_t t, int64_t b, int64_t r) {
    double acc = bi.empty() ? 0.0 : bi[size_t(r)];
    for (int64_t i = 0; i < I; ++i) acc += xv[size_t((t * B + b) * I + i)] * wi[size_t(r * I + i)];
    return acc;
  };
  auto hw = [&](const std::vector<double>& hv, int64_t b, int64_t r) {
    double acc = bh.empty() ? 0.0 : bh[size_t(r)];
    for (int64_t k = 0; k < H; ++k) acc += hv[size_t(b * H + k)] * wh[size_t(r * H + k)];
    return acc;
  };
  for (int64_t step = 0; step < S; ++step) {
    const int64_t t = o.reverse ? S - 1 - step : step;
    std::vector<double> hn = h, cn = c;
    for (int64_t b = 0; b < B; ++b) {
      if (!lengths.empty() && t >= lengths[size_t(b)]) continue;
      for (int64_t j = 0; j < H; ++j) {
        const size_t at = size_t(b * H + j);
        if (o.cell == RecurrentCell::RNN) {
          hn[at] = o.f(clip(xw(t, b, j) + hw(h, b, j)));
        } else if (o.cell == RecurrentCell::LSTM) {
          auto pre = [&](int64_t k) { return xw(t, b, k * H + j) + hw(h, b, k * H + j); };
          const double pi = p.empty() ? 0 : p[size_t(j)] * c[at];
          const double pf = p.empty() ? 0 : p[size_t(H + j)] * c[at];
          const double in = o.f(clip(pre(0) + pi));
          const double fg = o.input_forget ? 1.0 - in : o.f(clip(pre(1) + pf));
          cn[at] = fg * c[at] + in * o.g(clip(pre(2)));
          const double po = p.empty() ? 0 : p[size_t(2 * H + j)] * cn[at];
          hn[at] = o.f(clip(pre(3) + po)) * o.h(cn[at]);
        } else {
          const double r = o.f(clip(xw(t, b, j) + hw(h, b, j)));
          const double z = o.f(clip(xw(t, b, H + j) + hw(h, b, H + j)));
          double n;
          if (o.linear_before_reset) {
            n = o.g(clip(xw(t, b, 2 * H + j) + r * hw(h, b, 2 * H + j)));
          } else {
            // (r (.) h) W_hn^T + b_hn, with the reset gate of every hidden unit k.
            double acc = bh.empty() ? 0.0 : bh[size_t(2 * H + j)];
            for (int64_t k = 0; k < H; ++k) {
              const double rk = o.f(clip(xw(t, b, k) + hw(h, b, k)));
              acc += rk * h[size_t(b * H + k)] * wh[size_t((2 * H + j) * H + k)];
            }
            n = o.g(clip(xw(t, b, 2 * H + j) + acc));
          }
          hn[at] = (1 - z) * n + z * h[at];
        }
        y[size_t((t * B + b) * H + j)] = hn[at];
      }
    }
    h = hn;
    c = cn;
  }
  return {y, h, c};
}

RecurrentWeights random_weights(RecurrentCell cell, int64_t in, int64_t hidden, bool bias,
                                bool peephole, uint64_t seed) {
  const int64_t g = recurrent_gate_count(cell);
  RecurrentWeights w;
  w.w_ih = random_leaf({g * hidden, in}, -0.8, 0.8, seed);
  w.w_hh = random_leaf({g * hidden, hidden}, -0.8, 0.8, seed + 1);
  if (bias) {
    w.b_ih = random_leaf({g * hidden}, -0.5, 0.5, seed + 2);
    w.b_hh = random_leaf({g * hidden}, -0.5, 0.5, seed + 3);
  }
  if (peephole) w.peephole = random_leaf({3 * hidden}, -0.5, 0.5, seed + 4);
  return w;
}

struct Case {
  RecurrentCell cell;
  bool reverse = false, bias = true, peephole = false, lengths = false, states = false;
  bool linear_before_reset = true, input_forget = false;
  double clip = 0;
};

std::vector<Case> cases() {
  using C = RecurrentCell;
  std::vector<Case> out;
  for (C cell : {C::RNN, C::LSTM, C::GRU}) {
    out.push_back({cell});
    out.push_back({cell, true, true, false, true, true});            // reverse, lengths, states
    out.push_back({cell, false, true, false, true, false});          // lengths, zero states
    out.push_back({cell, false, false, false, false, true});         // no bias
    out.push_back({cell, false, true, false, false, false, true, false, 0.7});  // clip
  }
  out.push_back({C::LSTM, false, true, true, true, true});           // peepholes
  out.push_back({C::LSTM, true, true, true, true, false});           // peepholes, zero states
  out.push_back({C::LSTM, true, true, true, false, false, true, true});  // input_forget
  out.push_back({C::GRU, false, true, false, true, true, false});    // ONNX's GRU
  out.push_back({C::GRU, true, true, false, true, false, false});    // ONNX's GRU, zero states
  out.push_back({C::GRU, true, true, false, false, false, false, false, 0.5});
  return out;
}

std::string describe(const Case& k) {
  std::string s = k.cell == RecurrentCell::RNN ? "RNN" : k.cell == RecurrentCell::LSTM ? "LSTM" : "GRU";
  if (k.reverse) s += " reverse";
  if (!k.bias) s += " no-bias";
  if (k.peephole) s += " peephole";
  if (k.lengths) s += " lengths";
  if (k.states) s += " states";
  if (!k.linear_before_reset) s += " lbr=0";
  if (k.input_forget) s += " input_forget";
  if (k.clip > 0) s += " clip";
  return s;
}

constexpr int64_t S = 5, B = 3, I = 4, H = 3;

TEST(Recurrent, EveryCellMatchesTheEquations) {
  uint64_t seed = 10;
  for (const Case& k : cases()) {
    SCOPED_TRACE(describe(k));
    seed += 10;
    RecurrentWeights w = random_weights(k.cell, I, H, k.bias, k.peephole, seed);
    Tensor x = random_tensor({S, B, I}, -2, 2, seed + 5);
    Tensor h0 = k.states ? random_tensor({B, H}, -1, 1, seed + 6) : Tensor();
    Tensor c0 = k.states && k.cell == RecurrentCell::LSTM ? random_tensor({B, H}, -1, 1, seed + 7)
                                                           : Tensor();
    // One entry ends early, one is empty, one runs the whole sequence.
    std::vector<int64_t> lengths = k.lengths ? std::vector<int64_t>{2, 0, S} : std::vector<int64_t>{};
    RecurrentOptions opt;
    opt.cell = k.cell;
    opt.reverse = k.reverse;
    opt.linear_before_reset = k.linear_before_reset;
    opt.input_forget = k.input_forget;
    if (k.clip > 0) opt.clip = k.clip;
    RefOptions ro;
    ro.cell = k.cell;
    ro.reverse = k.reverse;
    ro.linear_before_reset = k.linear_before_reset;
    ro.input_forget = k.input_forget;
    ro.clip = k.clip;
    if (k.cell == RecurrentCell::RNN) ro.f = [](double v) { return std::tanh(v); };
    if (k.cell == RecurrentCell::GRU) ro.g = [](double v) { return std::tanh(v); };
    Tensor len = k.lengths ? from_vector(std::vector<double>{2, 0, S}, {B}).to(DType::Int64) : Tensor();
    for (DType dt : {DType::Float64, DType::Float32}) {
      auto cast = [&](const Tensor& t) { return t.defined() ? t.detach().to(dt) : t; };
      RecurrentWeights wd{cast(w.w_ih), cast(w.w_hh), cast(w.b_ih), cast(w.b_hh), cast(w.peephole)};
      RecurrentResult got = recurrent_layer(cast(x), wd, cast(h0), cast(c0), len, opt);
      Ref want = reference(x, w, h0, c0, lengths, ro);
      const double tol = dt == DType::Float64 ? 1e-12 : 2e-6;
      EXPECT_TRUE(all_close(got.output, from_vector(want.y, {S, B, H}).to(dt), tol, tol));
      EXPECT_TRUE(all_close(got.h, from_vector(want.h, {B, H}).to(dt), tol, tol));
      if (k.cell == RecurrentCell::LSTM) {
        EXPECT_TRUE(all_close(got.c, from_vector(want.c, {B, H}).to(dt), tol, tol));
      } else {
        EXPECT_FALSE(got.c.defined());
      }
    }
  }
}

TEST(Recurrent, GradientsMatchFiniteDifferences) {
  uint64_t seed = 300;
  for (const Case& k : cases()) {
    SCOPED_TRACE(describe(k));
    seed += 10;
    const int64_t s = 3, b = 2, i = 3, h = 2;
    RecurrentWeights w = random_weights(k.cell, i, h, k.bias, k.peephole, seed);
    const bool lstm = k.cell == RecurrentCell::LSTM;
    std::vector<Tensor> leaves = {random_leaf({s, b, i}, -1, 1, seed + 5), w.w_ih, w.w_hh};
    for (const Tensor& t : {w.b_ih, w.b_hh, w.peephole}) if (t.defined()) leaves.push_back(t);
    const size_t first_state = leaves.size();
    if (k.states) {
      leaves.push_back(random_leaf({b, h}, -1, 1, seed + 6));
      if (lstm) leaves.push_back(random_leaf({b, h}, -1, 1, seed + 7));
    }
    Tensor len = k.lengths ? from_vector(std::vector<double>{1, 3}, {b}).to(DType::Int64) : Tensor();
    RecurrentOptions opt;
    opt.cell = k.cell;
    opt.reverse = k.reverse;
    opt.linear_before_reset = k.linear_before_reset;
    opt.input_forget = k.input_forget;
    // A clip wide enough that no gate input sits at a kink of the clamp.
    if (k.clip > 0) opt.clip = 5.0;
    auto f = [&](const std::vector<Tensor>& in) {
      RecurrentWeights ww;
      size_t at = 1;
      ww.w_ih = in[at++];
      ww.w_hh = in[at++];
      if (k.bias) {
        ww.b_ih = in[at++];
        ww.b_hh = in[at++];
      }
      if (k.peephole) ww.peephole = in[at++];
      Tensor h0 = k.states ? in[first_state] : Tensor();
      Tensor c0 = k.states && lstm ? in[first_state + 1] : Tensor();
      RecurrentResult r = recurrent_layer(in[0], ww, h0, c0, len, opt);
      Tensor out = r.output.flatten() + 0.0;
      out = cat({out, r.h.flatten() * 0.7});
      return lstm ? cat({out, r.c.flatten() * 1.3}) : out;
    };
    EXPECT_TRUE(gradcheck(f, leaves));
  }
}

}  // namespace
}  // namespace smelt
