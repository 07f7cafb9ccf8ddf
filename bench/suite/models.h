// The models of the suite's MLP and transformer workloads, shared by the eager training steps
// (training_workloads.cpp) and the compiled forward passes (compiled_workloads.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt::bench {

// 784-1024-1024-10 with ReLU, as torch_bench.py's nn.Sequential.
inline std::shared_ptr<nn::Module> mlp() {
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 10)});
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

}  // namespace smelt::bench
