// RNN, LSTM, GRU: each direction becomes one recurrent_layer (include/smelt/recurrent.h) with
// the gate blocks of W, R, B and P reordered from ONNX's order (LSTM i o f c, GRU z r h; peepholes
// i o f) into PyTorch's, which recurrent_layer uses (LSTM i f c o, GRU r z h; peepholes i f o).
// Constant weights make the reordering free: the slices and cats fold at import.
#include <algorithm>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/recurrent.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

// Blocks of `size` along `dim`, taken in the order `from` (PyTorch's block k is ONNX's from[k]).
Tensor reorder_blocks(const Tensor& t, int64_t dim, int64_t size, const std::vector<int64_t>& from) {
  if (from.size() == 1) return t;
  std::vector<Tensor> blocks;
  for (int64_t k : from) blocks.push_back(t.slice(dim, k * size, (k + 1) * size));
  return cat(blocks, dim);
}

Ts convert_recurrent(NodeContext& c, RecurrentCell cell) {
  const int64_t gates = recurrent_gate_count(cell);
  const bool lstm = cell == RecurrentCell::LSTM, gru = cell == RecurrentCell::GRU;
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 2, 3, 1}
                                     : gru ? std::vector<int64_t>{1, 0, 2}
                                           : std::vector<int64_t>{0};
  const int64_t layout = c.opset() >= 14 ? c.attr_int("layout", 0) : 0;
  if (layout != 0 && layout != 1) c.invalid("layout must be 0 or 1");
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    c.invalid("direction '" + direction.substr(0, 40) +
              "' is not one of forward, reverse, bidirectional");
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;

  Tensor x = c.input(0);
  if (x.dim() != 3) c.invalid("X must be 3-D, got " + shape_str(x.shape()));
  if (!dtype_is_floating(x.dtype())) c.invalid("X must be floating point");
  if (layout == 1) x = x.transpose(0, 1);  // (batch, seq, in) -> (seq, batch, in)
  const Tensor& w = c.input(1);
  const Tensor& r = c.input(2);
  if (w.dim() != 3 || r.dim() != 3 || w.size(0) != dirs || r.size(0) != dirs ||
      r.size(1) % gates != 0) {
    c.invalid("W and R must be (" + std::to_string(dirs) + ", " + std::to_string(gates) +
              " * hidden_size, ...), got " + shape_str(w.shape()) + " and " + shape_str(r.shape()));
  }
  const int64_t hidden = r.size(2);
  if (c.has_attr("hidden_size") && c.attr_int("hidden_size") != hidden) {
    c.invalid("hidden_size " + std::to_string(c.attr_int("hidden_size")) +
              " does not match R " + shape_str(r.shape()));
  }
  auto optional_input = [&](size_t i) { return c.has_input(i) ? c.input(i) : Tensor(); };
  Tensor b = optional_input(3), lengths = optional_input(4);
  Tensor h0 = optional_input(5), c0 = lstm ? optional_input(6) : Tensor();
  Tensor p = lstm ? optional_input(7) : Tensor();
  if (b.defined() && b.shape() != Shape{dirs, 2 * gates * hidden}) {
    c.invalid("B must be " + shape_str({dirs, 2 * gates * hidden}) + ", got " + shape_str(b.shape()));
  }
  if (p.defined() && p.shape() != Shape{dirs, 3 * hidden}) {
    c.invalid("P must be " + shape_str({dirs, 3 * hidden}) + ", got " + shape_str(p.shape()));
  }
  for (Tensor* s : {&h0, &c0}) {
    if (s->defined() && layout == 1) *s = s->transpose(0, 1);  // (batch, dirs, H) -> (dirs, ...)
    if (s->defined() && s->shape() != Shape{dirs, x.size(1), hidden}) {
      c.invalid("initial states must be " + shape_str({dirs, x.size(1), hidden}) + ", got " +
                shape_str(s->shape()));
    }
  }

  RecurrentOptions options;
  options.cell = cell;
  if (c.has_attr("clip")) options.clip = c.attr_float("clip");
  if (gru) options.linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  if (lstm) options.input_forget = c.attr_int("input_forget", 0) != 0;
  // Activations: one list for both directions, each function taking alpha/beta in turn from the
  // shared lists when it uses them (as ONNX Runtime reads them).
  const size_t per_dir = lstm ? 3 : gru ? 2 : 1;
  std::vector<std::string> names = c.attr_strings("activations", std::vector<std::string>{});
  const std::vector<double> alphas = c.attr_floats("activation_alpha", std::vector<double>{});
  const std::vector<double> betas = c.attr_floats("activation_beta", std::vector<double>{});
  if (!names.empty() && names.size() != per_dir * size_t(dirs)) {
    c.invalid("activations must list " + std::to_string(per_dir * size_t(dirs)) +
              " functions, got " + std::to_string(names.size()));
  }
  std::vector<RecurrentActivation> acts;
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& n : names) {
    RecurrentActivation a(n);
    try {
      a.check();
    } catch (const Error& e) {
      c.unsupported(e.what());
    }
    if (a.uses_alpha() && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (a.uses_beta() && next_beta < betas.size()) a.beta = betas[next_beta++];
    acts.push_back(a);
  }

  std::vector<std::vector<Tensor>> steps;
  std::vector<Tensor> hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    RecurrentWeights weights;
    weights.w_ih = reorder_blocks(w.select(0, d), 0, hidden, order);
    weights.w_hh = reorder_blocks(r.select(0, d), 0, hidden, order);
    if (b.defined()) {
      Tensor bd = b.select(0, d);
      weights.b_ih = reorder_blocks(bd.slice(0, 0, gates * hidden), 0, hidden, order);
      weights.b_hh = reorder_blocks(bd.slice(0, gates * hidden, 2 * gates * hidden), 0, hidden, order);
    }
    if (p.defined()) weights.peephole = reorder_blocks(p.select(0, d), 0, hidden, {0, 2, 1});
    options.reverse = direction == "reverse" || d == 1;
    if (!acts.empty()) {
      options.activations.assign(acts.begin() + std::ptrdiff_t(size_t(d) * per_dir),
                                 acts.begin() + std::ptrdiff_t(size_t(d + 1) * per_dir));
    }
    RecurrentResult res = recurrent_layer(x, weights, h0.defined() ? h0.select(0, d) : Tensor(),
                                          c0.defined() ? c0.select(0, d) : Tensor(), lengths,
                                          options);
    steps.push_back(std::move(res.steps));
    hs.push_back(res.h);
    if (lstm) cs.push_back(res.c);
  }
  // Y (seq, dirs, batch, H): one stack of every step's state in that order, so that a compiled
  // plan writes each step's state straight into Y (a stack of the directions' own outputs would
  // copy both).
  const int64_t seq = x.size(0);
  std::vector<Tensor> ordered;
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t d = 0; d < dirs; ++d) ordered.push_back(steps[size_t(d)][size_t(t)]);
  }
  Tensor y = seq == 0 ? zeros({0, dirs, x.size(1), hidden}, x.dtype())
                      : stack(ordered, 0).reshape({seq, dirs, x.size(1), hidden});
  Tensor y_h = stack(hs, 0);              // (dirs, batch, H)
  Tensor y_c = lstm ? stack(cs, 0) : Tensor();
  if (layout == 1) {
    y = y.permute({2, 0, 1, 3});          // (batch, seq, dirs, H)
    y_h = y_h.transpose(0, 1);
    if (lstm) y_c = y_c.transpose(0, 1);
  }
  if (lstm) return {y, y_h, y_c};
  return {y, y_h};
}

}  // namespace

void register_recurrent_converters() {
  register_converter("RNN", [](NodeContext& c) { return convert_recurrent(c, RecurrentCell::RNN); });
  register_converter("LSTM", [](NodeContext& c) { return convert_recurrent(c, RecurrentCell::LSTM); });
  register_converter("GRU", [](NodeContext& c) { return convert_recurrent(c, RecurrentCell::GRU); });
}

}  // namespace smelt::onnx_import
