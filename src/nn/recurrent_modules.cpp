// nn::RNN, nn::LSTM, nn::GRU: PyTorch's recurrent modules, each layer and direction one
// recurrent_layer (src/nn/recurrent.cpp).
#include <cmath>
#include <sstream>

#include "smelt/nn.h"

namespace smelt::nn {
namespace {
const char* module_name(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::RNN: return "RNN";
    case RecurrentCell::LSTM: return "LSTM";
    case RecurrentCell::GRU: return "GRU";
  }
  return "?";
}
}  // namespace

Recurrent::Recurrent(RecurrentCell cell, int64_t input_size, int64_t hidden_size,
                     int64_t num_layers, bool with_bias, bool batch_first, double dropout_p,
                     bool bidirectional, DType dtype)
    : cell(cell),
      input_size(input_size),
      hidden_size(hidden_size),
      num_layers(num_layers),
      bias(with_bias),
      batch_first(batch_first),
      dropout(dropout_p),
      bidirectional(bidirectional) {
  const char* name = module_name(cell);
  SMELT_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0)
      << name << ": input_size, hidden_size and num_layers must be positive, got " << input_size
      << ", " << hidden_size << ", " << num_layers;
  SMELT_CHECK(dropout_p >= 0 && dropout_p <= 1)
      << name << ": dropout must be in [0, 1], got " << dropout_p;
  SMELT_CHECK(dtype_is_floating(dtype)) << name << ": dtype must be floating point";
  const int64_t dirs = bidirectional ? 2 : 1, gates = recurrent_gate_count(cell);
  const int64_t per = with_bias ? 4 : 2;
  // Sized once: the registry keeps pointers to these slots.
  params_.resize(size_t(num_layers * dirs * per));
  for (int64_t l = 0; l < num_layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const int64_t in = l == 0 ? input_size : hidden_size * dirs;
      Tensor* slot = &params_[size_t((l * dirs + d) * per)];
      slot[0] = empty({gates * hidden_size, in}, dtype);
      slot[1] = empty({gates * hidden_size, hidden_size}, dtype);
      register_parameter("weight_ih" + sfx, slot[0]);
      register_parameter("weight_hh" + sfx, slot[1]);
      if (with_bias) {
        slot[2] = empty({gates * hidden_size}, dtype);
        slot[3] = empty({gates * hidden_size}, dtype);
        register_parameter("bias_ih" + sfx, slot[2]);
        register_parameter("bias_hh" + sfx, slot[3]);
      }
    }
  }
  reset_parameters();
}

void Recurrent::reset_parameters() {
  const double bound = 1.0 / std::sqrt(double(hidden_size));
  for (const Tensor& p : params_) init::uniform_(p, -bound, bound);
}

RecurrentWeights Recurrent::weights(int64_t layer, bool reverse) const {
  const int64_t dirs = bidirectional ? 2 : 1, per = bias ? 4 : 2;
  SMELT_CHECK(layer >= 0 && layer < num_layers && (!reverse || bidirectional))
      << type_name() << ": no layer " << layer << (reverse ? " in reverse" : "") << " (it has "
      << num_layers << " layers" << (bidirectional ? ", two directions)" : ", one direction)");
  const Tensor* slot = &params_[size_t((layer * dirs + (reverse ? 1 : 0)) * per)];
  RecurrentWeights w{slot[0], slot[1], Tensor(), Tensor(), Tensor()};
  if (bias) {
    w.b_ih = slot[2];
    w.b_hh = slot[3];
  }
  return w;
}

Recurrent::Output Recurrent::forward_state(const Tensor& input, const Tensor& h0,
                                           const Tensor& c0) {
  const std::string name = type_name();
  const bool lstm = cell == RecurrentCell::LSTM;
  SMELT_CHECK(input.defined() && (input.dim() == 3 || input.dim() == 2))
      << name << ": the input must be (sequence, batch, " << input_size
      << ") (batch first when batch_first) or unbatched (sequence, " << input_size << "), got "
      << (input.defined() ? shape_str(input.shape()) : std::string("an undefined tensor"));
  SMELT_CHECK(input.size(-1) == input_size)
      << name << ": the input has " << input.size(-1) << " features, input_size is " << input_size;
  SMELT_CHECK(lstm || !c0.defined()) << name << ": c0 is for LSTM only";
  const bool unbatched = input.dim() == 2;
  Tensor x = unbatched ? input.unsqueeze(1) : (batch_first ? input.transpose(0, 1) : input);
  const int64_t dirs = bidirectional ? 2 : 1, batch = x.size(1);
  // Initial states: (L * D, B, H), or (L * D, H) for an unbatched input.
  auto state = [&](const Tensor& s, const char* what) {
    if (!s.defined()) return s;
    const Shape want = unbatched ? Shape{num_layers * dirs, hidden_size}
                                 : Shape{num_layers * dirs, batch, hidden_size};
    SMELT_CHECK(s.shape() == want) << name << ": " << what << " must be " << shape_str(want)
                                   << ", got " << shape_str(s.shape());
    return unbatched ? s.unsqueeze(1) : s;
  };
  Tensor h_init = state(h0, "h0"), c_init = state(c0, "c0");
  RecurrentOptions options;
  options.cell = cell;
  if (cell == RecurrentCell::RNN) {
    SMELT_CHECK(nonlinearity == "tanh" || nonlinearity == "relu")
        << name << ": nonlinearity must be 'tanh' or 'relu', got '" << nonlinearity << "'";
    options.activations = {{nonlinearity == "tanh" ? "Tanh" : "Relu"}};
  }
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t k = l * dirs + d;
      options.reverse = d == 1;
      RecurrentResult r = recurrent_layer(
          x, weights(l, d == 1), h_init.defined() ? h_init.select(0, k) : Tensor(),
          c_init.defined() ? c_init.select(0, k) : Tensor(), Tensor(), options);
      outs.push_back(r.output);
      h_n.push_back(r.h);
      if (lstm) c_n.push_back(r.c);
    }
    x = dirs == 1 ? outs[0] : cat(outs, 2);
    if (l + 1 < num_layers && dropout > 0) x = smelt::dropout(x, dropout, is_training());
  }
  Output out;
  out.output = unbatched ? x.squeeze(1) : (batch_first ? x.transpose(0, 1) : x);
  out.h_n = stack(h_n, 0);
  if (lstm) out.c_n = stack(c_n, 0);
  if (unbatched) {
    out.h_n = out.h_n.squeeze(1);
    if (lstm) out.c_n = out.c_n.squeeze(1);
  }
  return out;
}

std::string Recurrent::type_name() const { return module_name(cell); }

std::string Recurrent::extra_repr() const {
  std::ostringstream s;
  s << input_size << ", " << hidden_size;
  if (num_layers != 1) s << ", num_layers=" << num_layers;
  if (cell == RecurrentCell::RNN && nonlinearity != "tanh") s << ", nonlinearity=" << nonlinearity;
  if (!bias) s << ", bias=false";
  if (batch_first) s << ", batch_first=true";
  if (dropout != 0) s << ", dropout=" << dropout;
  if (bidirectional) s << ", bidirectional=true";
  return s.str();
}

RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers,
         const std::string& nonlinearity_name, bool bias, bool batch_first, double dropout,
         bool bidirectional, DType dtype)
    : Recurrent(RecurrentCell::RNN, input_size, hidden_size, num_layers, bias, batch_first,
                dropout, bidirectional, dtype) {
  SMELT_CHECK(nonlinearity_name == "tanh" || nonlinearity_name == "relu")
      << "RNN: nonlinearity must be 'tanh' or 'relu', got '" << nonlinearity_name << "'";
  nonlinearity = nonlinearity_name;
}

}  // namespace smelt::nn
