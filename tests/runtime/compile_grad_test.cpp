// Differentiable compiled calls (include/smelt/compile.h "Gradients", runtime/compile_grad.cpp):
// a call whose inputs or captured tensors require grad records one autograd node whose backward
// is the compiled backward half of the joint graph. Checked against eager autograd (the same
// losses, mixed with eager code), against finite differences (float64 gradcheck through the
// compiled function), across memory budgets (recomputation changes no bit), and at the edges:
// outputs that are not differentiable, an output that is an input, random ops, a gradient that
// reaches only some outputs, saved tensors changed in place, higher-order gradients, grad mode off.
#include <cmath>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "smelt/optim.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using Fn = CompiledFunction::Fn;
using testing::all_close;
using testing::expect_error;
using testing::same_bits;

Tensor rand_input(const Shape& shape, uint64_t seed, bool requires_grad = false) {
  Tensor t = testing::random_tensor(shape, -1, 1, seed).to(DType::Float32);
  if (requires_grad) t.set_requires_grad();
  return t;
}

CompileOptions with(const std::string& backend, double memory_budget = 0) {
  CompileOptions o;
  o.backend = backend;
  o.memory_budget = memory_budget;
  return o;
}

// The gradients of `leaves` after `loss().backward()`, each leaf's .grad reset first.
std::vector<Tensor> grads_of(const std::function<Tensor()>& loss, const std::vector<Tensor>& leaves) {
  for (Tensor t : leaves) t.set_grad(Tensor());
  loss().backward();
  std::vector<Tensor> g;
  for (const Tensor& t : leaves) g.push_back(t.grad().defined() ? t.grad().detach().clone() : Tensor());
  return g;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].defined(), want[k].defined()) << what << " gradient " << k;
    if (want[k].defined()) {
      EXPECT_TRUE(all_close(got[k], want[k], 1e-5, 1e-6)) << what << " gradient " << k;
    }
  }
}

// A block with a contraction, a normalization and pointwise work: what the partitioner chooses
// between saving and recomputing.
struct Block {
  Tensor w = rand_input({16, 24}, 1, true), b = rand_input({24}, 2, true), gamma = rand_input({24}, 3, true);
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = gelu(matmul(in[0], w) + b);
    Tensor n = layer_norm(h, {24}, gamma);
    return {n * sigmoid(h), argmax(h, 1)};
  }
  std::vector<Tensor> leaves() const { return {w, b, gamma}; }
};

// Issue 23's case: a loss that mixes a compiled part with eager parts gets every gradient eager
// backward() gives (it lost the compiled part's silently once), on both backends.
TEST(CompileGrad, MixedCompiledAndEagerLossMatchesEager) {
  for (const char* backend : {"interpreter", "cpp"}) {
    Block block;
    CompiledFunction f = compile(block, with(backend));
    Tensor x = rand_input({8, 16}, 4, true);
    std::vector<Tensor> leaves = block.leaves();
    leaves.push_back(x);
    auto loss_with = [&](const Fn& fn) {
      return [&, fn] {
        std::vector<Tensor> out = fn({x});
        return sum(out[0] * out[0]) + sum(matmul(x, block.w));  // compiled part + eager part
      };
    };
    const std::vector<Tensor> want = grads_of(loss_with(block), leaves);
    for (int call = 0; call < 2; ++call) {  // the second call replays both plans
      expect_close(grads_of(loss_with([&](const std::vector<Tensor>& in) { return f(in); }), leaves), want,
                   std::string(backend) + " call " + std::to_string(call));
    }
    const CompileReport& r = f.report();
    EXPECT_TRUE(r.differentiable);
    EXPECT_EQ(f.num_compiles(), 1);
    std::vector<Tensor> out = f({x});
    EXPECT_TRUE(out[0].requires_grad());
    EXPECT_FALSE(out[1].requires_grad());  // argmax: integers carry no gradient
    EXPECT_EQ(out[1].dtype(), DType::Int64);
  }
}

// Through the compiled function alone, float64: autograd's gradients against central differences.
TEST(CompileGrad, GradcheckThroughACompiledFunction) {
  Tensor w = testing::random_leaf({5, 3}, -1, 1, 10);
  CompiledFunction f = compile(
      [&](const std::vector<Tensor>& in) {
        Tensor h = tanh(matmul(in[0], w)) * in[1];
        return std::vector<Tensor>{softmax(h, 1), exp(in[1]) - h};
      },
      with("interpreter"));
  const Tensor x = testing::random_leaf({4, 5}, -1, 1, 11);
  const Tensor s = testing::random_leaf({4, 3}, -1, 1, 12);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> out = f({in[0], in[1]});
        return out[0] * 2.0 + out[1];
      },
      {x, s}));
  // and the captured weight's gradient equals eager's
  w.set_grad(Tensor());
  sum(f({x, s})[0] * f({x, s})[1]).backward();
  const Tensor compiled_w = w.grad().clone();
  w.set_grad(Tensor());
  Tensor h = tanh(matmul(x, w)) * s;
  sum(softmax(h, 1) * (exp(s) - h)).backward();
  EXPECT_TRUE(all_close(compiled_w, w.grad(), 1e-10, 1e-12));
}

// The memory budget moves what is saved and what is recomputed, never a result: every budget gives
// the same bits, and budget 0 keeps fewer bytes than budget 1 when there is pointwise work to
// recompute (here gelu, the layer norm and sigmoid over the matmul's output).
TEST(CompileGrad, BudgetsChangeSavedBytesNotResults) {
  Block block;
  Tensor x = rand_input({8, 16}, 20, true);
  std::vector<Tensor> leaves = block.leaves();
  leaves.push_back(x);
  std::vector<Tensor> first;
  std::vector<int64_t> saved;
  for (double budget : {1.0, 0.5, 0.0}) {
    CompiledFunction f = compile(block, with("interpreter", budget));
    const std::vector<Tensor> g = grads_of([&] { return sum(f({x})[0] * 3.0); }, leaves);
    if (first.empty()) first = g;
    for (size_t k = 0; k < g.size(); ++k) EXPECT_TRUE(same_bits(g[k], first[k])) << budget << " " << k;
    const CompileReport& r = f.report();
    saved.push_back(r.saved_bytes);
    EXPECT_EQ(r.saved_bytes_no_recompute, f.report().saved_bytes_no_recompute);
    if (budget == 1.0) {
      EXPECT_EQ(r.saved_bytes, r.saved_bytes_no_recompute) << r.partition;
    }
    EXPECT_NE(r.partition.find("saved for the backward"), std::string::npos);
    std::istringstream lines(r.partition);
    for (std::string line; std::getline(lines, line);) {
      const bool recomputed = line.find("  recomputed ") == 0;
      EXPECT_FALSE(recomputed && line.find("(matmul)") != std::string::npos) << r.partition;
    }
  }
  EXPECT_LE(saved[1], saved[0]);
  EXPECT_LT(saved[2], saved[0]) << "budget 0 recomputes the pointwise work";
}

// Outputs at the edges: one no gradient reaches (its tangent is zeros), one that is the input
// itself (its gradient is the incoming one), the same value returned twice (gradients add).
TEST(CompileGrad, OutputsAtTheEdges) {
  Tensor w = rand_input({6}, 30, true);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor y = in[0] * w;
    return std::vector<Tensor>{y, exp(in[0]), in[0], y};
  };
  CompiledFunction f = compile(fn, with("interpreter"));
  const Tensor x = rand_input({6}, 31, true);
  auto loss_with = [&](const Fn& g) {
    return [&, g] {
      std::vector<Tensor> o = g({x});
      return sum(o[0] * 2.0) + sum(o[2] * o[2]) + sum(o[3]);  // o[1] unused
    };
  };
  const std::vector<Tensor> want = grads_of(loss_with(fn), {x, w});
  expect_close(grads_of(loss_with([&](const std::vector<Tensor>& in) { return f(in); }), {x, w}), want, "edges");
  EXPECT_TRUE(x.is_leaf());  // the caller's tensor keeps its own state
  EXPECT_EQ(f({x})[2].storage().get(), x.storage().get());  // and the output aliases it
  // inputs that need no gradient: a call with x detached differentiates w only (another variant)
  const Tensor xd = x.detach();
  w.set_grad(Tensor());
  sum(f({xd})[0]).backward();
  EXPECT_TRUE(all_close(w.grad(), xd, 0, 0));
  EXPECT_EQ(f.num_compiles(), 1);
}

// Dropout inside a compiled function: the same seed draws the same mask as eager, and the
// gradient goes through the saved mask.
TEST(CompileGrad, RandomOpsGradientMatchesEager) {
  Tensor w = rand_input({32}, 40, true);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0] * w, 0.3, true)}; };
  CompiledFunction f = compile(fn, with("interpreter"));
  const Tensor x = rand_input({4, 32}, 41);
  manual_seed(7);
  const std::vector<Tensor> want = grads_of([&] { return sum(fn({x})[0] * x); }, {w});
  manual_seed(7);
  const std::vector<Tensor> got = grads_of([&] { return sum(f({x})[0] * x); }, {w});
  EXPECT_TRUE(same_bits(got[0], want[0]));
}

// What eager autograd refuses, a compiled call refuses with a clear error; grad mode off records
// nothing; a second backward needs retain_graph.
TEST(CompileGrad, ErrorsAndGradMode) {
  Tensor w = rand_input({5}, 50, true);
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0]) * w}; },
                               with("interpreter"));
  // a saved input changed in place after the call
  Tensor x = rand_input({5}, 51, true);
  Tensor y = f({x})[0];
  {
    NoGradGuard no_grad;
    x.mul_(2.0);
  }
  expect_error([&] { sum(y).backward(); }, {"changed in place after the call", "clone()"});
  // higher-order gradients
  x = rand_input({5}, 52, true);
  Tensor g = autograd::grad({sum(f({x})[0])}, {x}, {}, false, false)[0];
  EXPECT_TRUE(all_close(g, exp(x.detach()) * w.detach()));
  expect_error([&] { autograd::grad({sum(f({x})[0])}, {x}, {}, true, true); },
               {"higher-order gradient", "compiled function"});
  // retain_graph
  Tensor z = sum(f({x})[0]);
  z.backward({}, true);
  z.backward();
  expect_error([&] { z.backward(); }, "");
  // grad mode off: no history
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(f({x})[0].requires_grad());
  }
  // nothing requires grad: no history
  const Tensor v = rand_input({5}, 53);
  CompiledFunction h = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * v}; },
                               with("interpreter"));
  EXPECT_FALSE(h({x.detach()})[0].requires_grad());
  // the budget is checked
  expect_error([] { compile([](const std::vector<Tensor>& in) { return in; }, with("interpreter", 1.5)); },
               {"memory_budget", "valid: 0"});
}

// compile_module: the module's parameters get their gradients through its compiled forward, so an
// eager loss and optimizer train it as they train the eager module.
TEST(CompileGrad, CompiledModuleTrainsAsEager) {
  auto make = [] {
    manual_seed(3);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(12, 20), std::make_shared<nn::GELU>(), std::make_shared<nn::LayerNorm>(Shape{20}),
        std::make_shared<nn::Linear>(20, 3)});
  };
  auto eager = make(), compiled = make();
  CompiledFunction forward = compile_module(
      *compiled, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*compiled)(in[0])}; },
      with("interpreter"));
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::SGD opt_eager(eager->parameters(), o), opt_compiled(compiled->parameters(), o);
  for (int step = 0; step < 5; ++step) {
    const Tensor x = rand_input({10, 12}, uint64_t(60 + step));
    eager->zero_grad();
    compiled->zero_grad();
    const Tensor ye = (*eager)(x);
    Tensor le = mean(ye * ye);
    const Tensor yc = forward({x})[0];
    Tensor lc = mean(yc * yc);
    EXPECT_TRUE(all_close(lc.detach(), le.detach(), 1e-5, 1e-6)) << step;
    le.backward();
    lc.backward();
    opt_eager.step();
    opt_compiled.step();
  }
  const auto pe = eager->named_parameters(), pc = compiled->named_parameters();
  ASSERT_EQ(pe.size(), pc.size());
  for (size_t k = 0; k < pe.size(); ++k) EXPECT_TRUE(all_close(pc[k].second, pe[k].second, 1e-4, 1e-5)) << pe[k].first;
  EXPECT_TRUE(forward.report().differentiable);
}

// A training step under NoGradGuard: eager's loss.backward() fails there, and so does the step
// (it filled .grad once).
TEST(CompileGrad, TrainingStepWithGradModeOffIsAnError) {
  nn::Linear model(4, 2);
  CompiledFunction step = compile_training_step(
      model, [&](const std::vector<Tensor>& in) { const Tensor y = model(in[0]);
        return std::vector<Tensor>{mean(y * y)}; });
  NoGradGuard no_grad;
  expect_error([&] { step({rand_input({3, 4}, 70)}); }, {"grad mode off", "NoGradGuard"});
  EXPECT_FALSE(model.weight.grad().defined());
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// A compiled training step recomputes in its backward what the min cut chooses: every budget
// gives the same loss and gradients bit for bit (the recomputed ops are deterministic), and
// budget 0 keeps fewer bytes alive than budget 1 (the arena is smaller).
TEST(CompileGrad, TrainingStepRecomputationChangesMemoryNotResults) {
  auto make = [] {
    manual_seed(5);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::LayerNorm>(Shape{32}), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 4)});
  };
  for (const char* backend : {"interpreter", "cpp"}) {
    std::vector<Tensor> first;
    std::vector<int64_t> arena, saved;
    for (double budget : {1.0, 0.0}) {
      auto model = make();
      CompiledFunction step = compile_training_step(
          *model,
          [&](const std::vector<Tensor>& in) {
            const Tensor y = (*model)(in[0]);
            return std::vector<Tensor>{mean(softmax(y, 1) * y)};
          },
          with(backend, budget));
      std::vector<Tensor> got;
      for (int call = 0; call < 2; ++call) {
        model->zero_grad();
        got.push_back(step({rand_input({24, 16}, uint64_t(90 + call))})[0]);
      }
      for (const Tensor& p : model->parameters()) got.push_back(p.grad());
      if (first.empty()) first = got;
      for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], first[k])) << backend << " " << budget << " " << k;
      arena.push_back(step.report().arena_bytes);
      saved.push_back(step.report().saved_bytes);
      if (budget == 0) {
        EXPECT_NE(step.report().partition.find("recomputed"), std::string::npos) << step.report().partition;
      }
    }
    EXPECT_LT(saved[1], saved[0]) << backend;
    EXPECT_LT(arena[1], arena[0]) << backend;
  }
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// A division that refuses its operands raises in eager code even when its result is unused; a
// differentiable compiled call must too (its forward half kept only what the outputs and the
// backward need, once: found by the gradient fuzzer).
TEST(CompileGrad, AnUnreadRefusingOpRaisesAsInEager) {
  Tensor w = rand_input({3}, 95, true);
  const Tensor zero = from_vector(std::vector<int64_t>{0}, {1});
  CompiledFunction f = compile(
      [&](const std::vector<Tensor>& in) {
        (void)(in[1] / zero);
        return std::vector<Tensor>{exp(in[0]) * w};
      },
      with("interpreter"));
  const Tensor x = rand_input({3}, 96);
  const Tensor k = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  expect_error([&] { (void)(k / zero); }, "division by zero");
  expect_error([&] { f({x, k}); }, "division by zero");
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Adversarial inputs for a differentiable call: the same tensor passed as two inputs (its
// gradients add), an empty batch, NaN / inf / -0 / subnormal values, and a backward after the
// compiled function itself is gone: every gradient equals eager's bits. (Threads: below.)
TEST(CompileGrad, AdversarialCallsMatchEager) {
  Tensor w = rand_input({4}, 110, true);
  const Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * in[1] * w)}; };
  auto grads = [&](const Fn& g, const Tensor& x) {
    return autograd::grad({sum(g({x, x})[0])}, {x, w}, {}, false, false, true);
  };
  auto expect_same = [&](const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << what << " " << k;
  };
  Tensor y;
  {
    CompiledFunction f = compile(fn, with("interpreter"));
    const Fn compiled = [&](const std::vector<Tensor>& in) { return f(in); };
    expect_same(grads(compiled, rand_input({3, 4}, 111, true)), grads(fn, rand_input({3, 4}, 111, true)), "twice");
    const Tensor empty = zeros({0, 4}).set_requires_grad();
    expect_same(grads(compiled, empty), grads(fn, empty), "empty");
    const Tensor special =
        from_vector(std::vector<float>{NAN, INFINITY, -0.0f, 1e-41f, -INFINITY, 3.0f, 0.0f, -1e-41f}, {2, 4})
            .set_requires_grad();
    expect_same(grads(compiled, special), grads(fn, special), "special values");
    y = f({rand_input({3, 4}, 130), rand_input({3, 4}, 131)})[0];
  }  // the compiled function is gone; its output's backward still runs
  const Tensor gw = autograd::grad({sum(y)}, {w})[0];
  const Tensor want = autograd::grad({sum(fn({rand_input({3, 4}, 130), rand_input({3, 4}, 131)})[0])}, {w})[0];
  EXPECT_TRUE(same_bits(gw, want));
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Differentiable calls from several threads through one shared captured leaf: each thread's
// gradients equal eager's bits, every time (the engine kept its per-run counts and buffers on the
// nodes, which the threads share: a gradient came back undefined, or another thread's).
TEST(CompileGrad, ThreadsThroughASharedLeaf) {
  Tensor w = rand_input({4}, 140, true);
  const Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * in[1] * w)}; };
  CompiledFunction f = compile(fn, with("interpreter"));
  std::vector<std::vector<Tensor>> want;
  for (int t = 0; t < 4; ++t) {
    const Tensor x = rand_input({3, 4}, uint64_t(150 + t), true);
    want.push_back(autograd::grad({sum(fn({x, x})[0])}, {x, w}));
  }
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        const Tensor x = rand_input({3, 4}, uint64_t(150 + t), true);
        const std::vector<Tensor> got = autograd::grad({sum(f({x, x})[0])}, {x, w});
        for (size_t k = 0; k < got.size(); ++k) {
          if (!got[k].defined()) {
            errors[size_t(t)] = "round " + std::to_string(round) + ": gradient " + std::to_string(k) + " undefined";
            return;
          }
          if (!same_bits(got[k], want[size_t(t)][k])) {
            errors[size_t(t)] = "round " + std::to_string(round) + ": gradient " + std::to_string(k) + " differs";
            return;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
  // backward() from every thread at once: the shared leaf's .grad gets every contribution.
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 25; ++round) sum(f({rand_input({3, 4}, uint64_t(150 + t)), rand_input({3, 4}, uint64_t(150 + t))})[0]).backward();
    });
  }
  for (std::thread& th : threads) th.join();
  Tensor expected = zeros({4});
  for (int t = 0; t < 4; ++t) {
    const Tensor x = rand_input({3, 4}, uint64_t(150 + t));
    expected = expected + autograd::grad({sum(fn({x, x})[0])}, {w})[0] * 25.0;
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(testing::all_close(w.grad(), expected, 1e-5, 1e-6));
}

}  // namespace
}  // namespace smelt
