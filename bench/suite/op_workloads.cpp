// Single-op workloads: the same computations as bench/torch_bench.py, through smelt's public API.
#include <cstdint>

#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "suite/workload.h"

namespace smelt::bench {

namespace {


// Inference-style ops: inputs never require grad, and no graph is recorded.
Step no_grad(Step body) {
  return [body = std::move(body)] {
    NoGradGuard guard;
    body();
  };
}

Step elementwise_chain() {
  Tensor x = randn({kChainElements});  // (16M)
  Tensor a = scalar_tensor(1.5), b = scalar_tensor(0.25);
  return no_grad([=] { gelu(x * a + b); });
}

Step softmax_rows() {
  Tensor x = randn({kRows, kCols});
  return no_grad([=] { softmax(x, -1); });
}

Step log_softmax_rows() {
  Tensor x = randn({kRows, kCols});
  return no_grad([=] { log_softmax(x, -1); });
}

Step layer_norm_rows() {
  Tensor x = randn({kRows, kCols}), w = randn({kCols}), b = randn({kCols});
  return no_grad([=] { layer_norm(x, {kCols}, w, b); });
}

Step sgemm() {
  Tensor a = randn({kGemm, kGemm}), b = randn({kGemm, kGemm});
  return no_grad([=] { matmul(a, b); });
}

Step linear_relu() {
  Tensor x = randn({kGemm, kGemm}), w = randn({kGemm, kGemm}), b = randn({kGemm});
  return no_grad([=] { relu(linear(x, w, b)); });
}

Step conv3x3() {
  Tensor x = randn({1, 64, 56, 56}), w = randn({64, 64, 3, 3}), b = randn({64});
  return no_grad([=] { relu(conv2d(x, w, b, {1, 1}, {1, 1})); });
}

// The eager dispatcher's fixed cost: 1000 adds of one-element tensors (ms per 1000 = µs per op).
Step tiny_adds() {
  Tensor a = ones({1}), b = ones({1});
  return [=] {
    for (int i = 0; i < 1000; ++i) add(a, b);
  };
}

// A dependent chain y = y + b of 1000 one-element adds: what a compiled plan replays
// (compiled_workloads.cpp), here dispatched op by op.
Step tiny_chain() {
  Tensor a = ones({1}), b = ones({1});
  return no_grad([=] {
    Tensor y = a;
    for (int i = 0; i < 1000; ++i) y = add(y, b);
  });
}

}  // namespace

std::vector<Workload> op_workloads() {
  const double rows_bytes = 2.0 * 4 * kRows * kCols;  // read x, write y
  std::vector<Workload> w = {
      {.name = "gelu(x*a+b) 16M", .bytes = 2.0 * 4 * kChainElements, .build = elementwise_chain},
      {.name = "softmax 2048x1024", .bytes = rows_bytes, .build = softmax_rows},
      {.name = "log_softmax 2048x1024", .bytes = rows_bytes, .build = log_softmax_rows},
      {.name = "layer_norm 2048x1024", .bytes = rows_bytes, .build = layer_norm_rows},
      {.name = "sgemm 1024^3", .flops = 2.0 * kGemm * kGemm * kGemm, .build = sgemm},
      {.name = "linear+bias+relu 1024^3", .flops = 2.0 * kGemm * kGemm * kGemm, .build = linear_relu},
      {.name = "conv3x3 64->64 56x56 +bias+relu", .flops = 2.0 * 64 * 64 * 9 * 56 * 56, .build = conv3x3},
      {.name = "dispatch: 1000 tiny adds", .build = tiny_adds},
      {.name = "chain: 1000 tiny adds", .build = tiny_chain},
  };
  return w;
}

}  // namespace smelt::bench
