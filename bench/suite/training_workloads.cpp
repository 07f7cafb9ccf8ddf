// Model workloads, written with smelt's nn modules and optimizers: the same models, shapes and
// optimizers as bench/torch_bench.py. A training step = zero_grad, forward, loss, backward,
// optimizer step; the MLP and transformer block also run as inference forward passes (no grad),
// the eager side of their compiled versions (compiled_workloads.cpp).
#include <cstdint>
#include <memory>

#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/models.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "suite/models.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

Step train_step(std::shared_ptr<nn::Module> model, std::shared_ptr<optim::Optimizer> opt,
                Tensor x, Tensor y) {
  return [=] {
    opt->zero_grad();
    Tensor loss = cross_entropy((*model)(x), y);
    loss.backward();
    opt->step();
  };
}

Step mlp_train() {
  std::shared_ptr<nn::Module> model = mlp();
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return train_step(model, opt, randn({256, 784}), randint(0, 10, {256}));
}

// The demo's CNN shape class: 8x8 single-channel digits, batch 64.
Step cnn_train() {
  std::shared_ptr<nn::Module> model = models::digits_cnn();
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return train_step(model, opt, randn({64, 1, 8, 8}), randint(0, 10, {64}));
}

Step transformer_train() {
  auto block = std::make_shared<EncoderBlock>(256, 4);
  auto opt = std::make_shared<optim::AdamW>(block->parameters(), optim::AdamOptions{.lr = 1e-3});
  Tensor x = randn({8, 128, 256});  // (B, S, D)
  return [=] {
    opt->zero_grad();
    mean(pow((*block)(x), 2.0)).backward();
    opt->step();
  };
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

std::vector<Workload> training_workloads() {
  // Matmul flops, forward + backward = 3x forward.
  const double mlp_flops = 6.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  const double cnn_flops = 6.0 * 64 * (64 * (16 * 9 + 32 * 16 * 9) + 512 * 64 + 64 * 10);
  const double tokens = 8 * 128, d = 256;
  const double transformer_flops = 3.0 * (2 * tokens * 12 * d * d + 4 * 8 * 128.0 * 128 * d);
  const double mlp_forward_flops = mlp_flops / 3, transformer_forward_flops = transformer_flops / 3;
  const std::string no_training_compile =
      "compile_training_step (include/smelt/compile.h) landed after this suite's training rows; "
      "driving it (compiled forward+backward, then the optimizer) is next";
  return {
      {.name = "MLP 784-1024-1024-10 forward b256", .flops = mlp_forward_flops, .build = mlp_forward},
      {.name = "transformer block d256 h4 s128 b8 forward", .flops = transformer_forward_flops,
       .build = transformer_forward},
      {.name = "MLP 784-1024-1024-10 train step b256", .flops = mlp_flops,
       .training = true, .build = mlp_train},
      {.name = "CNN digits train step b64", .flops = cnn_flops,
       .training = true, .build = cnn_train},
      {.name = "transformer block d256 h4 s128 b8 fwd+bwd+AdamW", .flops = transformer_flops,
       .training = true, .build = transformer_train},
      {.name = "MLP 784-1024-1024-10 train step b256", .impl = "smelt-compiled", .missing = no_training_compile},
      {.name = "CNN digits train step b64", .impl = "smelt-compiled", .missing = no_training_compile},
      {.name = "transformer block d256 h4 s128 b8 fwd+bwd+AdamW", .impl = "smelt-compiled",
       .missing = no_training_compile},
  };
}

}  // namespace smelt::bench
