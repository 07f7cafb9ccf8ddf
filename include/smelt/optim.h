// Optimizers (SGD, Adam, AdamW), learning-rate schedulers and gradient clipping, with PyTorch's
// update rules and formulas.
//
//   optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   optim::CosineAnnealingLR sched(opt, /*t_max=*/100);
//   for (...) { opt.zero_grad(); loss.backward(); optim::clip_grad_norm_(params, 1.0);
//               opt.step(); sched.step(); }
//
// Each step updates every parameter that has a gradient with one fused in-place pass (parameters
// without a gradient are skipped). Per-group lr and weight_decay allow, say, no decay on biases.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smelt/state_dict.h"
#include "smelt/tensor.h"

namespace smelt::optim {

// What the caller passes: unset options take the optimizer's defaults.
struct ParamGroupOptions {
  std::vector<Tensor> params;
  std::optional<double> lr = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
};

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 0;
  double weight_decay = 0;
  std::optional<double> initial_lr;  // set by the first scheduler: the lr it scales from
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  virtual std::string type_name() const = 0;
  // Drops every parameter's .grad.
  void zero_grad();

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Sets lr in every group.
  void set_lr(double lr);

  // Flat, for checkpoints:
  //   param_groups.<g>.lr / .weight_decay / .initial_lr   float64 0-dim
  //   param_groups.<g>.num_params                         int64 0-dim
  //   state.<i>.step                                      int64 0-dim
  //   state.<i>.<buffer>                                  the parameter's shape and dtype
  // where <i> counts parameters over all groups in order. The tensors are copies.
  StateDict state_dict() const;
  // Restores lr, weight_decay, step counts and buffers. Validates everything first (group and
  // parameter counts, key names, shapes) and changes nothing on error.
  void load_state_dict(const StateDict& state);

  // ---- The update as smelt ops, for compiled training steps (smelt::compile_step traces it
  // into its plan, where it fuses into one pass over each parameter). Eager step() runs the
  // fused kernels of kernels/optim.h instead; tests/optim checks that both give the same values.

  struct ParamState {
    int64_t step = 0;             // 0: no update yet (buffers not created)
    std::vector<Tensor> buffers;  // in the order of buffer_names()
  };
  // The per-parameter state buffers this optimizer keeps, by name.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Parameter `index`, counted over all groups in order: its group and its state.
  size_t num_params() const { return state_.size(); }
  const ParamGroup& group_of(size_t index) const;
  const Tensor& param(size_t index) const;
  ParamState& param_state(size_t index);
  const ParamState& param_state(size_t index) const;
  // Creates the state buffers of parameter `index` (zeros) when it has none yet.
  void ensure_state(size_t index);
  // What one parameter's update takes as inputs on every call, in this order: values that change
  // with the learning rate and the step count (`step`: the update about to be made, from 1).
  virtual std::vector<double> update_scalars(const ParamGroup& group, int64_t step) const = 0;
  // What the update bakes in as constants (momentum, betas, eps, weight decay...), as text: a
  // compiled step built with other constants compiles again. `first_step`: the parameter's first
  // update, which some rules treat apart (SGD's dampened momentum).
  virtual std::string update_constants(const ParamGroup& group, bool first_step) const = 0;
  // The new parameter and state buffers (buffer_names() order), computed with smelt ops from
  // the parameter, its gradient, its state buffers and the scalars (0-dim tensors of the
  // parameter's dtype, in update_scalars() order). Pure: nothing is written.
  virtual std::vector<Tensor> update(const Tensor& param, const Tensor& grad,
                                     const std::vector<Tensor>& state,
                                     const std::vector<Tensor>& scalars, const ParamGroup& group,
                                     bool first_step) const = 0;

 protected:
  Optimizer(std::vector<ParamGroupOptions> groups, double default_lr, double default_weight_decay);
  // Calls fn(group, param, state) for each parameter that has a gradient.
  template <class F>
  void for_each_param_with_grad(F fn) {
    size_t index = 0;
    for (ParamGroup& g : groups_) {
      for (Tensor& p : g.params) {
        if (p.grad().defined()) fn(g, p, state_[index]);
        ++index;
      }
    }
  }

 private:
  std::vector<ParamGroup> groups_;
  std::vector<ParamState> state_;  // one per parameter, over all groups in order
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroupOptions> groups, SGDOptions options = {});
  void step() override;
  std::string type_name() const override { return "SGD"; }
  const SGDOptions& options() const { return options_; }
  std::vector<std::string> buffer_names() const override;
  std::vector<double> update_scalars(const ParamGroup& group, int64_t step) const override;
  std::string update_constants(const ParamGroup& group, bool first_step) const override;
  std::vector<Tensor> update(const Tensor& param, const Tensor& grad,
                             const std::vector<Tensor>& state, const std::vector<Tensor>& scalars,
                             const ParamGroup& group, bool first_step) const override;

 private:
  SGDOptions options_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Unset: 0 for Adam, 1e-2 for AdamW (PyTorch's defaults).
  std::optional<double> weight_decay = std::nullopt;
  bool amsgrad = false;
  bool maximize = false;
};

// Adam: L2 weight decay added to the gradient.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroupOptions> groups, AdamOptions options = {});
  void step() override;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return options_; }
  std::vector<std::string> buffer_names() const override;
  std::vector<double> update_scalars(const ParamGroup& group, int64_t step) const override;
  std::string update_constants(const ParamGroup& group, bool first_step) const override;
  std::vector<Tensor> update(const Tensor& param, const Tensor& grad,
                             const std::vector<Tensor>& state, const std::vector<Tensor>& scalars,
                             const ParamGroup& group, bool first_step) const override;

 protected:
  Adam(std::vector<ParamGroupOptions> groups, AdamOptions options, bool decoupled);

 private:
  AdamOptions options_;
  bool decoupled_;
};

// AdamW: decoupled weight decay (the parameter shrinks by lr * weight_decay each step).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {});
  AdamW(std::vector<ParamGroupOptions> groups, AdamOptions options = {});
};

// ---- learning-rate schedulers
//
// A scheduler owns an epoch counter (starting at 0) and writes lr = f(epoch, base_lr) into every
// group, where base_lr is the group's initial_lr (recorded by the first scheduler attached).
// Construction applies epoch 0; step() advances by one. Formulas are PyTorch's closed forms.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  int64_t last_epoch() const { return last_epoch_; }
  // Jumps to `epoch` and applies it (resuming from a checkpoint).
  void set_epoch(int64_t epoch);
  std::vector<double> get_last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The learning rate at `epoch` for a group starting from `base_lr`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  // Subclasses call this at the end of their constructor (lr_at is virtual).
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

// base_lr * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// base_lr * (start + (end - start) min(epoch, total_iters) / total_iters): a linear warm-up.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
           int64_t total_iters = 5);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// Runs schedulers one after another: scheduler k is active from milestones[k-1] on, and sees the
// epoch counted from its milestone (warm-up then cosine, say). Schedulers must share `optimizer`.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<const LRScheduler*> schedulers,
               std::vector<int64_t> milestones);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<const LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
};

// Scales all gradients by max_norm / (total + 1e-6) when their total 2-norm exceeds max_norm
// (the gradients are replaced, never written through). Returns the total norm before clipping.
// A NaN/inf total leaves the gradients as they are; error_if_nonfinite makes it an error.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm,
                       bool error_if_nonfinite = false);

}  // namespace smelt::optim
