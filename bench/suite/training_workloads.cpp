// Model workloads, written with smelt's nn modules and optimizers: the same models, shapes and
// optimizers as bench/torch_bench.py. A training step = zero_grad, forward, loss, backward,
// optimizer step; the MLP and transformer block also run as inference forward passes (no grad),
// the eager side of their compiled versions (compiled_workloads.cpp). The smelt-compiled training
// rows run the same step as one compiled plan: forward, backward and the same optimizer's update
// (compile_step, backend "cpp": generated kernels compiled before the first timed call).
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>

#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "smelt/models.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "suite/models.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

// A model, its optimizer, the loss of one batch and the batch: what a training step runs, eager
// or compiled.
struct TrainCase {
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<optim::Optimizer> opt;
  std::function<Tensor(nn::Module&, const std::vector<Tensor>&)> loss;
  std::vector<Tensor> inputs;
};

Tensor cross_entropy_loss(nn::Module& m, const std::vector<Tensor>& in) { return cross_entropy(m(in[0]), in[1]); }

TrainCase mlp_case() {
  std::shared_ptr<nn::Module> model = mlp();
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return {model, opt, cross_entropy_loss, {randn({256, 784}), randint(0, 10, {256})}};
}

TrainCase cnn_case() {
  std::shared_ptr<nn::Module> model = models::digits_cnn();
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return {model, opt, cross_entropy_loss, {randn({64, 1, 8, 8}), randint(0, 10, {64})}};
}

TrainCase transformer_case() {
  auto block = std::make_shared<EncoderBlock>(256, 4);
  auto opt = std::make_shared<optim::AdamW>(block->parameters(), optim::AdamOptions{.lr = 1e-3});
  return {block, opt, [](nn::Module& m, const std::vector<Tensor>& in) { return mean(pow(m(in[0]), 2.0)); },
          {randn({8, 128, 256})}};
}

// zero_grad, forward, loss, backward, optimizer step: the eager training step.
Step eager_train(TrainCase c) {
  return [c] {
    c.opt->zero_grad();
    c.loss(*c.model, c.inputs).backward();
    c.opt->step();
  };
}

// compile_step (the optimizer's update in the plan) with generated kernels compiled before the
// first call; `memory_budget` as CompileOptions' (0: the backward recomputes what the min cut
// chooses; 1: nothing). `with_optimizer` false: compile_training_step (forward and backward only).
CompiledFunction compile_case(const TrainCase& c, double memory_budget = 0, bool with_optimizer = true) {
  CompileOptions options;
  options.backend = "cpp";
  options.memory_budget = memory_budget;
  nn::Module* model = c.model.get();
  auto loss = c.loss;
  auto loss_fn = [model, loss](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss(*model, in)}; };
  if (!with_optimizer) return compile_training_step(*c.model, loss_fn, options);
  return compile_step(*c.model, loss_fn, *c.opt, {}, options);
}

// The compiled step: forward, backward and the optimizer's update, one plan.
Workload compiled_train(std::string name, double flops, std::function<TrainCase()> make,
                        double memory_budget = 0) {
  auto holder = std::make_shared<std::optional<CompiledFunction>>();
  Workload w{.name = std::move(name), .flops = flops, .impl = "smelt-compiled", .training = true};
  w.build = [holder, make, memory_budget] {
    TrainCase c = make();
    CompiledFunction f = compile_case(c, memory_budget);
    *holder = f;
    return Step([f, c]() mutable { f(c.inputs); });
  };
  w.note = [holder]() -> std::string {
    if (!holder->has_value()) return "";
    const CompileReport& r = (*holder)->report();
    std::ostringstream os;
    os << "joint graph: " << r.kernels << " kernels, " << r.op_steps << " op steps";
    if (r.interpreted_groups) os << ", " << r.interpreted_groups << " interpreted groups";
    os << "; arena " << r.arena_bytes / 1024 << " KiB (lower bound " << r.lower_bound_bytes / 1024
       << " KiB, naive " << r.naive_bytes / 1024 << " KiB); the backward keeps "
       << r.saved_bytes / 1024 << " KiB of forward values (" << r.saved_bytes_no_recompute / 1024
       << " KiB recomputing nothing)";
    return os.str();
  };
  w.plan = [holder]() -> std::string {
    if (!holder->has_value()) return "";
    const CompileReport& r = (*holder)->report();
    return r.partition + "\n" + r.fusion + "\n" + r.plan;
  };
  return w;
}

// Inference forward passes of the same models (no grad): the eager side of the compiled ones.
Step mlp_forward() {
  std::shared_ptr<nn::Module> model = mlp();
  Tensor x = randn({256, 784});
  return [=] {
    NoGradGuard guard;
    (*model)(x);
  };
}

Step transformer_forward() {
  auto block = std::make_shared<EncoderBlock>(256, 4);
  Tensor x = randn({8, 128, 256});
  return [=] {
    NoGradGuard guard;
    (*block)(x);
  };
}

}  // namespace

// The first compiled training step (compile_step: its plan holds the joint graph and Adam's update).
std::vector<CompileTimeCase> training_compile_time_cases() {
  return {{"MLP 784-1024-1024-10 train step b256", [] {
             TrainCase c = mlp_case();
             c.loss(*c.model, c.inputs).backward();  // the eager kernels' per-process choices, untimed
             c.opt->zero_grad();
             return measure_first_call(compile_case(c), c.inputs);
           }}};
}

std::vector<Workload> training_workloads() {
  // Matmul flops, forward + backward = 3x forward.
  const double mlp_flops = 6.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  const double cnn_flops = 6.0 * 64 * (64 * (16 * 9 + 32 * 16 * 9) + 512 * 64 + 64 * 10);
  const double tokens = 8 * 128, d = 256;
  const double transformer_flops = 3.0 * (2 * tokens * 12 * d * d + 4 * 8 * 128.0 * 128 * d);
  const double mlp_forward_flops = mlp_flops / 3, transformer_forward_flops = transformer_flops / 3;
  return {
      {.name = "MLP 784-1024-1024-10 forward b256", .flops = mlp_forward_flops, .build = mlp_forward},
      {.name = "transformer block d256 h4 s128 b8 forward", .flops = transformer_forward_flops,
       .build = transformer_forward},
      {.name = "MLP 784-1024-1024-10 train step b256", .flops = mlp_flops,
       .training = true, .build = [] { return eager_train(mlp_case()); }},
      {.name = "CNN digits train step b64", .flops = cnn_flops,
       .training = true, .build = [] { return eager_train(cnn_case()); }},
      {.name = "transformer block d256 h4 s128 b8 fwd+bwd+AdamW", .flops = transformer_flops,
       .training = true, .build = [] { return eager_train(transformer_case()); }},
      compiled_train("MLP 784-1024-1024-10 train step b256", mlp_flops, mlp_case),
      compiled_train("CNN digits train step b64", cnn_flops, cnn_case),
      compiled_train("transformer block d256 h4 s128 b8 fwd+bwd+AdamW", transformer_flops, transformer_case),
      // The same compiled steps recomputing nothing: what recomputation saves (peak memory).
      compiled_train("MLP 784-1024-1024-10 train step b256, memory_budget 1", mlp_flops, mlp_case, 1),
      compiled_train("transformer block d256 h4 s128 b8 fwd+bwd+AdamW, memory_budget 1", transformer_flops,
                     transformer_case, 1),
  };
}

}  // namespace smelt::bench
