// Recurrent layers as functions: one direction of an Elman RNN, an LSTM or a GRU over a whole
// sequence, written with smelt ops (so they differentiate, trace and compile like any other
// code). nn::RNN / nn::LSTM / nn::GRU (smelt/nn.h) stack them into PyTorch's modules, and the ONNX
// importer maps the RNN, LSTM and GRU operators onto them.
//
//   RecurrentWeights w{w_ih, w_hh, b_ih, b_hh};
//   RecurrentResult r = recurrent_layer(x, w, h0, c0, /*lengths=*/Tensor(), {RecurrentCell::LSTM});
//   r.output  // (S, B, H): the hidden state after every step
//   r.h, r.c  // (B, H): the last state
//
// How it runs: the input projection x W_ih^T + b for all S steps is one GEMM; each step is one
// (B, H) x (H, gates*H) product plus the gate arithmetic, which the graph compiler fuses into one
// kernel per step. Gates are in PyTorch's order (LSTM: input, forget, cell, output; GRU: reset,
// update, new), so PyTorch's state dicts load as they are; the ONNX importer reorders ONNX's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

enum class RecurrentCell { RNN, LSTM, GRU };

// The number of gate blocks of `gates * hidden` rows in W_ih and W_hh: 1, 4, 3.
int64_t recurrent_gate_count(RecurrentCell cell);

// An elementwise nonlinearity of a cell, by its ONNX name (case-insensitive): Sigmoid, Tanh,
// Relu, Affine (alpha x + beta), LeakyRelu (alpha), ThresholdedRelu (alpha), ScaledTanh
// (alpha tanh(beta x)), HardSigmoid (clamp(alpha x + beta, 0, 1)), Elu (alpha), Softsign,
// Softplus. An unset alpha or beta takes ONNX's default for that function.
struct RecurrentActivation {
  RecurrentActivation(std::string name, std::optional<double> alpha = std::nullopt,
                      std::optional<double> beta = std::nullopt)
      : name(std::move(name)), alpha(alpha), beta(beta) {}
  std::string name;
  std::optional<double> alpha, beta;

  Tensor operator()(const Tensor& x) const;
  // Throws smelt::Error naming the valid functions, or an alpha/beta given to one that takes none.
  void check() const;
  bool uses_alpha() const;
  bool uses_beta() const;
};

struct RecurrentWeights {
  Tensor w_ih;      // (gates * H, I)
  Tensor w_hh;      // (gates * H, H)
  Tensor b_ih;      // (gates * H), or undefined
  Tensor b_hh;      // (gates * H), or undefined
  Tensor peephole;  // LSTM only, (3 * H): the weights of c in the input, forget, output gates
};

struct RecurrentOptions {
  RecurrentCell cell = RecurrentCell::LSTM;
  // Run from the last step to the first (the backward half of a bidirectional layer). With
  // `lengths`, an entry's steps run from its own last one.
  bool reverse = false;
  // Empty: the defaults, RNN tanh; LSTM (f, g, h) = (sigmoid, tanh, tanh); GRU (f, g) =
  // (sigmoid, tanh). Otherwise exactly 1, 3 or 2 functions.
  std::vector<RecurrentActivation> activations;
  // Clamp every gate's input to [-clip, clip] before its activation (ONNX's `clip`).
  std::optional<double> clip;
  // GRU: r * (h W_hn^T + b_hn) (PyTorch's GRU, ONNX linear_before_reset = 1) when true;
  // (r * h) W_hn^T + b_hn (ONNX's default) when false.
  bool linear_before_reset = true;
  // LSTM: the forget gate is 1 - input gate (ONNX's input_forget).
  bool input_forget = false;
};

struct RecurrentResult {
  Tensor output;  // (S, B, H), in step order of x (a reverse layer's output at x's step t)
  Tensor h;       // (B, H)
  Tensor c;       // (B, H), LSTM only
  // output's S slices (B, H) before stacking, in x's step order: a caller that lays the steps
  // out otherwise (ONNX's (S, directions, B, H)) stacks these, and a compiled plan then writes
  // each step straight into its place.
  std::vector<Tensor> steps;
};

// x (S, B, I). h0, c0 (B, H): undefined means zeros (the first step then leaves out the
// products with the zero state: with inf or NaN in w_hh, its output is finite where a product with
// zeros would be NaN; the next steps are the same); c0 only for LSTM. lengths: undefined, or an
// integer tensor (B) with values in [0, S] (others are an index error, also on a compiled
// plan's every call); steps at or past an entry's length leave its state unchanged and write zeros
// to its output (ONNX's sequence_lens). Differentiable in x, the
// weights and the initial states.
RecurrentResult recurrent_layer(const Tensor& x, const RecurrentWeights& w, const Tensor& h0,
                                const Tensor& c0, const Tensor& lengths,
                                const RecurrentOptions& options);

}  // namespace smelt
