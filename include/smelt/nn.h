// Neural-network modules: parameters and buffers registered by name, train/eval modes, state
// dicts, and the common layers with PyTorch's default initializations.
//
//   auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
//       std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(),
//       std::make_shared<nn::Linear>(32, 10)});
//   Tensor logits = (*model)(x);
//   model->named_parameters();  // {"0.weight", ...}, {"0.bias", ...}, {"2.weight", ...}, ...
//
// The registry points at a module's tensor members (Linear::weight, ...): assigning a member
// (tying two weights, say) is seen by named_parameters(), and loading a state dict copies into
// the members in place. An undefined member (a disabled bias) is skipped. Initialization draws
// from smelt's default generator, so smelt::manual_seed(s) makes model creation reproducible.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/recurrent.h"
#include "smelt/state_dict.h"
#include "smelt/tensor.h"

namespace smelt::nn {

class Module;
using ModulePtr = std::shared_ptr<Module>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // "Linear", "Sequential", ...
  virtual std::string type_name() const = 0;
  // The constructor arguments worth showing: "in_features=4, out_features=3, bias=true".
  virtual std::string extra_repr() const { return ""; }
  // The module tree, one child per line (as PyTorch prints it).
  std::string to_string() const;

  // Registration order, children after own tensors, names joined with '.'. A tensor reachable
  // under two names (tied weights) is listed once, under the first.
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, ModulePtr>> named_children() const { return children_; }
  int64_t num_parameters() const;  // total element count
  // The member slots behind named_parameters() (parameters = true) or named_buffers(), by dotted
  // name, with every name of a tied tensor: trace::trace_module binds symbolic tensors to them
  // while tracing and puts the module's own tensors back afterwards.
  std::vector<std::pair<std::string, Tensor*>> named_slots(bool parameters);

  // Training mode (dropout active, batch norm uses and updates batch statistics), recursively.
  void train(bool on = true);
  void eval() { train(false); }
  // (Read while smelt::compile traces a function, the mode becomes part of the compiled
  // signature: a module switched to eval later recompiles, or reuses the eval plan.)
  bool is_training() const;

  // Drops every parameter's .grad (PyTorch's set_to_none behaviour).
  void zero_grad();

  // Parameters and buffers by dotted name, detached (they share data with the module).
  StateDict state_dict() const;

  struct LoadResult {
    std::vector<std::string> missing_keys;
    std::vector<std::string> unexpected_keys;
  };
  // Copies `state` into the module's tensors in place (casting dtypes). Strict: a missing or an
  // unexpected key is an error listing them all. A shape mismatch is always an error. Nothing is
  // copied unless every check passes.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registers the member `slot` (which lives as long as the module) under `name`. A parameter
  // is made a leaf that requires grad.
  void register_parameter(const std::string& name, Tensor& slot);
  void register_buffer(const std::string& name, Tensor& slot);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, ModulePtr module);
  using Slots = std::vector<std::pair<std::string, Tensor*>>;
  // The defined tensors under this module, with their dotted names.
  void collect(Slots& out, const std::string& prefix, bool parameters, bool recurse) const;
  void print(std::string& out, int indent) const;

  Slots parameters_;
  Slots buffers_;
  std::vector<std::pair<std::string, ModulePtr>> children_;
  // Shared with the compiled functions whose traces read it (nn/mode_reads.h): they compare it
  // on every call, also after the module is gone.
  std::shared_ptr<bool> training_ = std::make_shared<bool>(true);
};

// ---- initializers (in place, without recording gradients; nullptr = the default generator)
namespace init {
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (rank >= 2).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
void uniform_(const Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
inline void zeros_(const Tensor& t) { constant_(t, 0.0); }
inline void ones_(const Tensor& t) { constant_(t, 1.0); }
// He uniform for a leaky ReLU of slope `a`, fan_in mode: bound = sqrt(6 / ((1 + a^2) fan_in)).
void kaiming_uniform_(const Tensor& t, double a = 0.0, Generator* gen = nullptr);
// Glorot uniform: bound = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
}  // namespace init

// ---- layers

// y = x W^T + b. weight (out, in), bias (out).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::Float32);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) weight, uniform(+-1/sqrt(fan_in)) bias.
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;
};

// weight (out, in / groups, kH, kW), bias (out).
class Conv2d : public Module {
 public:
  struct Options {
    std::vector<int64_t> stride = {1, 1};
    std::vector<int64_t> padding = {0, 0};
    std::vector<int64_t> dilation = {1, 1};
    int64_t groups = 1;
    bool bias = true;
    DType dtype = DType::Float32;
  };
  // kernel_size: one number or (kH, kW), as nn.Conv2d's
  Conv2d(int64_t in_channels, int64_t out_channels, IntOr2 kernel_size, Options options);
  Conv2d(int64_t in_channels, int64_t out_channels, IntOr2 kernel_size)
      : Conv2d(in_channels, out_channels, std::move(kernel_size), Options{}) {}
  Tensor forward(const Tensor& x) override;  // x (N, C, H, W)
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size;
  Options options;
  Tensor weight, bias;
};

// Batch normalization over (N, H, W) per channel. Buffers: running_mean (C), running_var (C),
// num_batches_tracked (0-dim Int64). momentum nullopt = cumulative average (as PyTorch's None).
class BatchNorm2d : public Module {
 public:
  struct Options {
    double eps = 1e-5;
    std::optional<double> momentum = 0.1;
    bool affine = true;
    DType dtype = DType::Float32;
  };
  BatchNorm2d(int64_t num_features, Options options);
  explicit BatchNorm2d(int64_t num_features) : BatchNorm2d(num_features, Options{}) {}
  Tensor forward(const Tensor& x) override;  // x (N, C, H, W)
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;

  int64_t num_features;
  Options options;
  Tensor weight, bias;  // learnable when affine; fixed ones/zeros otherwise (not parameters)
  Tensor running_mean, running_var, num_batches_tracked;
};

// Normalizes over the trailing `normalized_shape` dims. weight/bias have that shape.
class LayerNorm : public Module {
 public:
  LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
            bool bias = true, DType dtype = DType::Float32);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

// Zeroes elements with probability p in training mode (survivors scaled by 1/(1-p)); identity in
// eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  double p;
};

// A lookup table: Int64 indices (...) -> (..., embedding_dim). weight ~ normal(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::Float32);
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

// Max pooling over (N, C, H, W); stride defaults to the kernel size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntOr2 kernel_size, IntOr2 stride = {}, IntOr2 padding = 0);
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel_size, stride, padding); }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
};

// Average pooling over (N, C, H, W) (padding counted, as PyTorch's default).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntOr2 kernel_size, IntOr2 stride = {}, IntOr2 padding = 0);
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, kernel_size, stride, padding); }
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
};

// Averages each (H, W) plane down to output_size.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntOr2 output_size) : output_size(output_size.pair()) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
};

// Runs its children in order; they are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(const std::vector<ModulePtr>& modules);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }
  size_t size() const { return layers_.size(); }
  const ModulePtr& operator[](size_t i) const;

 private:
  void append(ModulePtr module);
  std::vector<ModulePtr> layers_;
};

// ---- activations
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string type_name() const override { return "ReLU"; }
};
class GELU : public Module {
 public:
  explicit GELU(GeluApprox approximate = GeluApprox::None) : approximate(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  GeluApprox approximate;
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::string type_name() const override { return "Tanh"; }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string type_name() const override { return "Sigmoid"; }
};
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return silu(x); }
  std::string type_name() const override { return "SiLU"; }
};
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, negative_slope); }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  double negative_slope;
};

// ---- recurrent layers (PyTorch's nn.RNN, nn.LSTM, nn.GRU; smelt/recurrent.h per layer)
// x (S, B, I), or (B, S, I) with batch_first, or unbatched (S, I). Parameters as PyTorch names
// them (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then _reverse for the backward
// direction, then l1, ...), all ~ uniform(+-1/sqrt(hidden_size)). Dropout applies to the
// outputs of every layer but the last, in training mode.
class Recurrent : public Module {
 public:
  struct Output {
    Tensor output;  // (S, B, D * H), or (B, S, D * H) with batch_first
    Tensor h_n;     // (num_layers * D, B, H), D = 2 when bidirectional
    Tensor c_n;     // LSTM only
  };
  Recurrent(RecurrentCell cell, int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
            bool bias = true, bool batch_first = false, double dropout = 0.0,
            bool bidirectional = false, DType dtype = DType::Float32);
  // The output sequence only (so the module fits a Sequential).
  Tensor forward(const Tensor& x) override { return forward_state(x).output; }
  // h0, c0 (num_layers * D, B, H); undefined means zeros.
  Output forward_state(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor());
  std::string type_name() const override;
  std::string extra_repr() const override;
  void reset_parameters();
  // Layer l's weights for one direction.
  RecurrentWeights weights(int64_t layer, bool reverse) const;

  RecurrentCell cell;
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"

 private:
  std::vector<Tensor> params_;  // per layer and direction: w_ih, w_hh, [b_ih, b_hh]
};

class RNN : public Recurrent {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false, DType dtype = DType::Float32);
};
class LSTM : public Recurrent {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
       DType dtype = DType::Float32)
      : Recurrent(RecurrentCell::LSTM, input_size, hidden_size, num_layers, bias, batch_first,
                  dropout, bidirectional, dtype) {}
};
class GRU : public Recurrent {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
      bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
      DType dtype = DType::Float32)
      : Recurrent(RecurrentCell::GRU, input_size, hidden_size, num_layers, bias, batch_first,
                  dropout, bidirectional, dtype) {}
};

}  // namespace smelt::nn
