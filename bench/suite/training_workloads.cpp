// Training-step workloads, written with smelt's nn modules and optimizers: the same models,
// shapes and optimizers as bench/torch_bench.py. One step = zero_grad, forward, loss, backward,
// optimizer step.
#include <cmath>
#include <cstdint>
#include <memory>

#include "smelt/creation.h"
#include "smelt/models.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

using nn::ModulePtr;

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
  auto model = std::make_shared<nn::Sequential>(std::vector<ModulePtr>{
      std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 10)});
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return train_step(model, opt, randn({256, 784}), randint(0, 10, {256}));
}

// The demo's CNN shape class: 8x8 single-channel digits, batch 64.
Step cnn_train() {
  std::shared_ptr<nn::Module> model = models::digits_cnn();
  auto opt = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
  return train_step(model, opt, randn({64, 1, 8, 8}), randint(0, 10, {64}));
}

// PyTorch's nn.TransformerEncoderLayer(d, heads, dim_feedforward=4d, dropout=0, norm_first=True,
// batch_first=True), written out:
//   x = x + out_proj(attention(in_proj(norm1(x))));  x = x + linear2(relu(linear1(norm2(x))))
// in_proj is one (3d, d) Linear as in PyTorch's MultiheadAttention.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(int64_t d, int64_t heads) : d_(d), heads_(heads) {
    norm1_ = register_module("norm1", std::make_shared<nn::LayerNorm>(Shape{d}));
    in_proj_ = register_module("in_proj", std::make_shared<nn::Linear>(d, 3 * d));
    out_proj_ = register_module("out_proj", std::make_shared<nn::Linear>(d, d));
    norm2_ = register_module("norm2", std::make_shared<nn::LayerNorm>(Shape{d}));
    linear1_ = register_module("linear1", std::make_shared<nn::Linear>(d, 4 * d));
    linear2_ = register_module("linear2", std::make_shared<nn::Linear>(4 * d, d));
  }

  Tensor forward(const Tensor& x) override {  // x (B, S, D)
    Tensor y = x + attention((*norm1_)(x));
    return y + (*linear2_)(relu((*linear1_)((*norm2_)(y))));
  }
  std::string type_name() const override { return "EncoderBlock"; }

 private:
  Tensor attention(const Tensor& h) {  // h (B, S, D)
    const int64_t batch = h.size(0), seq = h.size(1), head_dim = d_ / heads_;
    Tensor qkv = (*in_proj_)(h);  // (B, S, 3D)
    auto heads_of = [&](int64_t part) {  // (B, H, S, Dh)
      return qkv.slice(2, part * d_, (part + 1) * d_)
          .reshape({batch, seq, heads_, head_dim})
          .permute({0, 2, 1, 3});
    };
    Tensor q = heads_of(0), k = heads_of(1), v = heads_of(2);
    Tensor scores = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(head_dim)));  // (B, H, S, S)
    Tensor context = matmul(softmax(scores, -1), v);  // (B, H, S, Dh)
    return (*out_proj_)(context.permute({0, 2, 1, 3}).reshape({batch, seq, d_}));
  }

  int64_t d_, heads_;
  std::shared_ptr<nn::LayerNorm> norm1_, norm2_;
  std::shared_ptr<nn::Linear> in_proj_, out_proj_, linear1_, linear2_;
};

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


}  // namespace

std::vector<Workload> training_workloads() {
  // Matmul flops, forward + backward = 3x forward.
  const double mlp_flops = 6.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  const double cnn_flops = 6.0 * 64 * (64 * (16 * 9 + 32 * 16 * 9) + 512 * 64 + 64 * 10);
  const double tokens = 8 * 128, d = 256;
  const double transformer_flops = 3.0 * (2 * tokens * 12 * d * d + 4 * 8 * 128.0 * 128 * d);
  return {
      {.name = "MLP 784-1024-1024-10 train step b256", .flops = mlp_flops,
       .training = true, .build = mlp_train},
      {.name = "CNN digits train step b64", .flops = cnn_flops,
       .training = true, .build = cnn_train},
      {.name = "transformer block d256 h4 s128 b8 fwd+bwd+AdamW", .flops = transformer_flops,
       .training = true, .build = transformer_train},
  };
}

}  // namespace smelt::bench
