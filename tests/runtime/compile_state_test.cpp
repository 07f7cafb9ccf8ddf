// smelt::compile around state (include/smelt/compile.h, docs/design.md "Captured tensors"):
// tensors a compiled function captures are read on every call, in every use, whatever their
// values or size; what cannot be compiled faithfully (changing a captured tensor in place, reading
// values while traced, an undefined output) is an error that says so and changes nothing; outputs
// that are inputs or views of them alias them as in eager code; a compiled function inside another
// is inlined.
#include <array>
#include <cstring>
#include <vector>

#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using Fn = CompiledFunction::Fn;
using testing::expect_error;
using testing::same_bits;

Tensor rand_range32(const Shape& shape, double low, double high, uint64_t seed) {
  return testing::random_tensor(shape, low, high, seed).to(DType::Float32);
}

CompileOptions on(const std::string& backend) {
  CompileOptions o;
  o.backend = backend;
  return o;
}

// Calls the compiled and the eager function after each change of the captured state; every call
// must equal eager bit for bit (the same kernels decide both on these elementwise graphs).
void expect_fresh_after_each_change(const Fn& fn, const std::vector<Tensor>& inputs,
                                    const std::vector<std::function<void()>>& changes,
                                    const std::string& backend = "interpreter") {
  CompiledFunction f = compile(fn, on(backend));
  for (size_t step = 0; step <= changes.size(); ++step) {
    if (step > 0) {
      NoGradGuard no_grad;
      changes[step - 1]();
    }
    std::vector<Tensor> got = f(inputs), want = fn(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_TRUE(testing::all_close(got[k], want[k], 1e-6, 1e-6))
          << "output " << k << " after change " << step << "\n"
          << f.report().plan;
    }
  }
  EXPECT_EQ(f.num_compiles(), 1) << "a captured tensor is an input: its changes need no recompile";
}

TEST(CompileState, ACapturedTensorChangedInPlaceIsReadFreshByEveryUse) {
  // Found by a newcomer: x * w + w.sum() gave x * new_w + old_sum (the sum folded at build).
  for (const std::string backend : {"interpreter", "cpp"}) {
    Tensor w = rand_range32({8}, -1, 1, 3);
    Tensor x = rand_range32({4, 8}, -1, 1, 4);
    Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w + w.sum()}; };
    expect_fresh_after_each_change(fn, {x}, {[&] { w.mul_(2.0); }, [&] { w.add_(-0.5); }}, backend);
  }
}

TEST(CompileState, ACapturedTensorIsFreshWhateverItsValuesOrSize) {
  // All ones (x * 1 simplified away), 4 elements (exp folded at build) and past the fold limit:
  // one rule for all.
  for (int64_t n : {4, 1 << 16}) {
    Tensor ones_w = ones({n});
    Tensor x = rand_range32({2, n}, -1, 1, 5);
    Fn by_ones = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * ones_w}; };
    expect_fresh_after_each_change(by_ones, {x}, {[&] { ones_w.fill_(3.0); }});
    Tensor w = rand_range32({n}, -1, 1, 6);
    Fn by_exp = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + exp(w)}; };
    expect_fresh_after_each_change(by_exp, {x}, {[&] { w.add_(1.0); }});
  }
}

TEST(CompileState, ACapturedLinearUpdatedInPlaceUsesTheNewWeightAndBias) {
  manual_seed(11);
  nn::Linear linear(6, 3);
  Tensor x = rand_range32({5, 6}, -1, 1, 7);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(linear(in[0]))}; };
  expect_fresh_after_each_change(
      fn, {x},
      {[&] { linear.weight.mul_(-1.0); }, [&] { linear.bias.add_(0.25); },
       [&] {
         linear.weight.add_(0.125);
         linear.bias.mul_(2.0);
       }});
}

TEST(CompileState, MemoryChangedOutsideSmeltIsReadFresh) {
  // Wrapped memory (from_blob, NumPy) changes without a version bump: read on every call.
  std::vector<float> memory = {1, 2, 3, 4};
  Tensor w = from_blob(memory.data(), {4}, DType::Float32);
  Tensor x = rand_range32({3, 4}, -1, 1, 8);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w + exp(w)}; };
  expect_fresh_after_each_change(fn, {x},
                                 {[&] { memory[2] = -7; }, [&] { memory.assign(4, 0.5f); }});
}

TEST(CompileState, TensorsTheFunctionCreatesStayConstants) {
  // Numbers and tensors made while traced are the same on every call: constants the passes fold,
  // not inputs.
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * exp(full({4}, 0.5)) + arange(0, 4, 1, DType::Float32)};
  };
  CompiledFunction f = compile(fn, on("interpreter"));
  Tensor x = rand_range32({2, 4}, -1, 1, 9);
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
  EXPECT_EQ(f.compiled_graph().num_inputs(), 1u);
}

TEST(CompileState, ACapturedTensorIsOneInputHoweverOftenItIsUsed) {
  Tensor w = rand_range32({4}, -1, 1, 10);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * w + w * w - w.sum()};
  };
  CompiledFunction f = compile(fn, on("interpreter"));
  Tensor x = rand_range32({3, 4}, -1, 1, 11);
  EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6));
  EXPECT_EQ(f.compiled_graph().num_inputs(), 2u);
}

TEST(CompileState, ChangingACapturedTensorInPlaceInsideIsRefusedAndChangesNothing) {
  // Found by a newcomer: a counter incremented inside ran once per trace (5 calls: 1 1 1 5 6).
  Tensor counter = zeros({1});
  Fn fn = [&](const std::vector<Tensor>& in) {
    counter.add_(1.0);
    return std::vector<Tensor>{in[0] + counter};
  };
  CompiledFunction f = compile(fn, on("interpreter"));
  for (int call = 0; call < 2; ++call) {
    expect_error([&] { f({ones({1})}); }, {"add_", "captured", "in place", "once"});
  }
  EXPECT_EQ(counter.item(), 0.0);
  Tensor filled = zeros({2});
  CompiledFunction g = compile(
      [&](const std::vector<Tensor>& in) {
        filled.fill_(1.0);
        return std::vector<Tensor>{in[0] + filled};
      },
      on("interpreter"));
  expect_error([&] { g({ones({2})}); }, {"fill_", "captured"});
  EXPECT_EQ(filled.to_vector(), (std::vector<double>{0, 0}));
  // An in-place op on a tensor the function makes itself, from a captured one: a read of the
  // captured values while traced.
  Tensor w = ones({2});
  CompiledFunction h = compile(
      [&](const std::vector<Tensor>& in) {
        Tensor t = zeros({2});
        t.add_(w);
        return std::vector<Tensor>{in[0] + t};
      },
      on("interpreter"));
  expect_error([&] { h({ones({2})}); }, {"captured", "traced"});
}

TEST(CompileState, ReadingValuesWhileTracedSaysWhy) {
  Tensor flag = ones({});
  CompiledFunction branch = compile(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{flag.item() > 0 ? in[0] + 1.0 : in[0] - 1.0};
      },
      on("interpreter"));
  expect_error([&] { branch({ones({2})}); }, {"captured", "where()"});
  CompiledFunction symbolic = compile(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0].sum().item() > 0 ? in[0] + 1.0 : in[0] - 1.0};
      },
      on("interpreter"));
  expect_error([&] { symbolic({ones({2})}); }, {"symbolic", "where()"});
  // Eager code after the failed traces reads values as usual.
  EXPECT_EQ(flag.item(), 1.0);
}

TEST(CompileState, AnUndefinedOutputIsAnErrorNotACrash) {
  CompiledFunction f = compile(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] + 1.0, Tensor()};
      },
      on("interpreter"));
  expect_error([&] { f({ones({2})}); }, {"output 1", "undefined"});
  nn::Linear linear(2, 2);
  CompiledFunction m = compile_module(
      linear,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{Tensor(), linear(in[0])};
      },
      on("interpreter"));
  expect_error([&] { m({ones({1, 2})}); }, {"output 0", "undefined"});
}

TEST(CompileState, ACompiledFunctionInsideAnotherIsInlined) {
  Tensor w = rand_range32({3}, -1, 1, 12);
  CompiledFunction inner =
      compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * w)}; },
              on("interpreter"));
  Fn outer_fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{inner({in[0] * 2.0})[0] + 1.0};
  };
  CompiledFunction outer = compile(outer_fn, on("interpreter"));
  Tensor x = rand_range32({2, 3}, -1, 1, 13);
  Tensor want = tanh(x * 2.0 * w) + 1.0;
  EXPECT_TRUE(same_bits(outer({x})[0], want));
  EXPECT_TRUE(same_bits(outer({x})[0], want));
  EXPECT_TRUE(same_bits(inner({x})[0], tanh(x * w)));  // and it still runs on its own
  EXPECT_EQ(inner.num_compiles(), 1);
}

TEST(CompileState, OutputsThatAreInputsOrViewsOfThemAliasThemAsInEagerCode) {
  Tensor x = rand_range32({4, 6}, -1, 1, 14);
  Tensor w = rand_range32({6}, -1, 1, 15);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        in[0], in[0] * 2.0,           in[0].reshape({6, 4}), in[0].t(), in[0].slice(1, 1, 5, 2),
        w,     in[0].t().contiguous()};
  };
  CompiledFunction f = compile(fn, on("interpreter"));
  for (int call = 0; call < 2; ++call) {
    std::vector<Tensor> got = f({x}), want = fn({x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      EXPECT_EQ(got[k].strides(), want[k].strides()) << "output " << k;
      const bool eager_aliases =
          want[k].storage() == x.storage() || want[k].storage() == w.storage();
      EXPECT_EQ(got[k].storage() == want[k].storage(), eager_aliases) << "output " << k;
    }
  }
  // A function that only returns its input: no computed output at all.
  CompiledFunction identity =
      compile([](const std::vector<Tensor>& in) { return in; }, on("interpreter"));
  EXPECT_EQ(identity({x})[0].storage(), x.storage());
  // A strided input: traced as contiguous (as the plan reads it), so its outputs are the plan's
  // copies, equal in value (include/smelt/compile.h).
  Tensor xt = x.t();
  CompiledFunction strided = compile(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0].reshape({24}), in[0], in[0].contiguous()};
      },
      on("interpreter"));
  std::vector<Tensor> got = strided({xt});
  EXPECT_TRUE(same_bits(got[0], xt.reshape({24})));
  EXPECT_TRUE(same_bits(got[1], xt));
  EXPECT_TRUE(same_bits(got[2], xt.contiguous()));
  for (const Tensor& t : got) EXPECT_NE(t.storage(), xt.storage());
}

TEST(CompileState, CapturedTensorsAreFreshAcrossDynamicBatchSizes) {
  Tensor w = rand_range32({5}, -1, 1, 16);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w + w.sum()}; };
  CompiledFunction f = compile(fn, on("interpreter"));
  for (int64_t b : {2, 3, 7, 3, 1}) {
    {
      NoGradGuard no_grad;
      w.add_(0.5);
    }
    Tensor x = rand_range32({b, 5}, -1, 1, uint64_t(20 + b));
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6)) << "batch " << b;
  }
}

TEST(CompileState, AModuleForwardReadsCapturedTensorsFresh) {
  manual_seed(17);
  nn::Linear linear(4, 4);
  Tensor scale = rand_range32({4}, 0.5, 1.5, 18);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0]) * scale}; };
  CompiledFunction f = compile_module(linear, fn, on("interpreter"));
  Tensor x = rand_range32({3, 4}, -1, 1, 19);
  for (int step = 0; step < 3; ++step) {
    {
      NoGradGuard no_grad;
      scale.mul_(-1.5);
    }
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6)) << "step " << step;
  }
  EXPECT_EQ(f.num_compiles(), 1);
}

// CompileOptions::freeze: captured tensors are constants the passes fold; a change in place
// recompiles (saying so) instead of going unseen; wrapped memory stays an input read every call.
TEST(CompileState, FrozenCapturedTensorsRecompileWhenChanged) {
  Tensor w = rand_range32({6, 6}, -1, 1, 30);
  std::vector<float> memory(6, 0.5f);
  Tensor wrapped = from_blob(memory.data(), {6}, DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(matmul(in[0], w.t())) + exp(w.sum({0})) * wrapped};
  };
  CompileOptions o = on("interpreter");
  o.freeze = true;
  CompiledFunction f = compile(fn, o);
  Tensor x = rand_range32({3, 6}, -1, 1, 31);
  auto expect_eager = [&](const char* when) {
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-5, 1e-6)) << when << "\n"
                                                                       << f.report().plan;
  };
  expect_eager("first call");
  EXPECT_EQ(f.compiled_graph().num_inputs(), 2u) << "the wrapped memory stays an input";
  expect_eager("replayed");
  EXPECT_EQ(f.num_compiles(), 1);
  memory[3] = -2;  // no version: read on every call, no recompile
  expect_eager("after a write to wrapped memory");
  EXPECT_EQ(f.num_compiles(), 1);
  {
    NoGradGuard no_grad;
    w.mul_(-0.5);
  }
  expect_eager("after an in-place change");
  EXPECT_EQ(f.num_compiles(), 2);
  ASSERT_FALSE(f.recompile_reasons().empty());
  const std::string reason = f.recompile_reasons().back();
  EXPECT_NE(reason.find("frozen captured tensor float32 (6, 6) changed in place"),
            std::string::npos)
      << reason;
  expect_eager("replayed after the recompile");
  EXPECT_EQ(f.num_compiles(), 2);
}

// Found by the second-batch fuzzer: the dynamic batch kept the versions of its latest trace, not
// those its fitted constants were folded from, so a change after the fit went unseen.
TEST(CompileState, FrozenCapturedTensorsRecompileOnTheDynamicBatchToo) {
  Tensor w = rand_range32({4}, -1, 1, 32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * exp(w) + w.sum()};
  };
  CompileOptions o = on("interpreter");
  o.freeze = true;
  CompiledFunction f = compile(fn, o);
  int step = 0;
  for (int64_t b : {2, 3, 5, 3, 7, 2}) {
    if (step == 2 || step == 4) {
      NoGradGuard no_grad;
      w.add_(0.25);
    }
    Tensor x = rand_range32({b, 4}, -1, 1, uint64_t(40 + step));
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6))
        << "call " << step << ", batch " << b;
    ++step;
  }
}

// Found in review: a parameter kept in a variable and used in the loss beside the module was a
// captured input of the joint graph, so its gradient was lost (0.64 for 0.44..1.59).
TEST(CompileState, ATrainingStepRefusesACapturedTensorThatRequiresGrad) {
  manual_seed(50);
  auto linear = std::make_shared<nn::Linear>(4, 1);
  Tensor kept = linear->weight;  // the same tensor, held outside the module
  CompiledFunction step = compile_training_step(
      *linear,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mse_loss((*linear)(in[0]), in[1]) + (kept * kept).sum()};
      },
      on("interpreter"));
  expect_error([&] { step({rand_range32({3, 4}, -1, 1, 51), rand_range32({3, 1}, -1, 1, 52)}); },
               {"requires grad", "captured", "through the module"});
  EXPECT_FALSE(linear->weight.grad().defined());
  // detach()ed, it is a plain input: no gradient wanted, none lost.
  Tensor detached = linear->weight.detach();
  CompiledFunction fine = compile_training_step(
      *linear,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mse_loss((*linear)(in[0]), in[1]) + (detached * detached).sum()};
      },
      on("interpreter"));
  fine({rand_range32({3, 4}, -1, 1, 51), rand_range32({3, 1}, -1, 1, 52)});
  EXPECT_TRUE(linear->weight.grad().defined());
}

// Found in review: Graph::trace inside a compiled function (an export, say) refused to read what
// it captured, which it may do anywhere else.
TEST(CompileState, AGraphTraceInsideACompiledFunctionMayReadItsCapturedTensors) {
  Tensor w = rand_range32({3}, -1, 1, 53);
  double read = 0;
  CompiledFunction f = compile(
      [&](const std::vector<Tensor>& in) {
        Graph inner = Graph::trace(
            [&](const std::vector<Tensor>& x, const std::vector<Tensor>&) {
              read = w.to_vector()[1];  // the captured values, read while traced
              return std::vector<Tensor>{x[0] * w};
            },
            {ones({3})});
        EXPECT_EQ(inner.num_inputs(), 1u);  // a constant there, as Graph::trace makes it
        return std::vector<Tensor>{in[0] * w};
      },
      on("interpreter"));
  Tensor x = rand_range32({3}, -1, 1, 54);
  EXPECT_TRUE(same_bits(f({x})[0], x * w));
  EXPECT_DOUBLE_EQ(read, w.to_vector()[1]);
}

TEST(CompileState, InvalidDynamicProbesAreRefusedWhenCompiling) {
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1.0}; };
  for (std::array<int64_t, 4> probes :
       {std::array<int64_t, 4>{0, 19, 23, 29}, std::array<int64_t, 4>{17, 17, 23, 29},
        std::array<int64_t, 4>{17, 19, 23, -1}, std::array<int64_t, 4>{17, 19, 23, 17},
        std::array<int64_t, 4>{17, 19, 23, int64_t(1) << 21}}) {
    CompileOptions o = on("interpreter");
    o.dynamic_probes = probes;
    expect_error([&] { compile(fn, o); }, {"dynamic_probes", "four distinct positive sizes up to 2^20"});
  }
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Legality is the lowering's (fusion::FusionOptions::lowers): a group it would refuse — a softmax
// over empty rows does not decompose — is not made, so nothing runs node by node on the
// interpreter; its nodes run as op steps.
TEST(CompileState, FusionMakesNoGroupTheLoweringWouldRefuse) {
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{softmax(in[0] * 2.0, -1) + 1.0}; };
  CompiledFunction f = compile(fn, on("interpreter"));
  Tensor x = zeros({3, 0});
  std::vector<Tensor> got = f({x});
  EXPECT_EQ(got[0].shape(), (Shape{3, 0}));
  EXPECT_EQ(f.report().interpreted_groups, 0) << f.report().plan;
  EXPECT_NE(f.report().fusion.find("would not lower"), std::string::npos) << f.report().fusion;
  Tensor y = rand_range32({3, 5}, -1, 1, 60);  // the same function on rows that are not empty fuses
  CompiledFunction g = compile(fn, on("interpreter"));
  EXPECT_TRUE(testing::all_close(g({y})[0], fn({y})[0], 1e-6, 1e-6));
  EXPECT_EQ(g.report().fusion.find("would not lower"), std::string::npos) << g.report().fusion;
}

// Found in review: a BatchNorm2d in training mode captured by compile() gave the generic "read
// the values of a captured tensor"; it says what to use instead, and changes nothing.
TEST(CompileState, ABatchNormTrainingInsideCompileSaysToCompileTheModule) {
  nn::BatchNorm2d bn(2);
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{bn(in[0])}; },
                               on("interpreter"));
  expect_error([&] { f({rand_range32({2, 2, 3, 3}, -1, 1, 61)}); }, {"BatchNorm2d", "compile_module"});
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  bn.eval();
  Tensor x = rand_range32({2, 2, 3, 3}, -1, 1, 62);
  CompiledFunction g = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{bn(in[0])}; },
                               on("interpreter"));
  EXPECT_TRUE(testing::all_close(g({x})[0], bn(x), 1e-6, 1e-6));
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// A function that captures a module and calls it: the module's train / eval mode is read while
// traced (dropout, batch norm trace differently per mode), so it is part of the signature. Found
// in issue 22's review: model.eval() after a compile in training mode kept running dropout.
TEST(CompileState, ACapturedModuleSwitchedToEvalIsSeen) {
  for (const char* backend : {"interpreter", "cpp"}) {
    nn::Linear lin(6, 4);
    nn::Dropout drop(0.5);
    nn::BatchNorm2d bn(4);
    const Fn fn = [&](const std::vector<Tensor>& in) {
      const Tensor h = drop(lin(in[0]));
      return std::vector<Tensor>{h, bn(h.reshape({-1, 4, 1, 1}))};
    };
    CompileOptions options;
    options.backend = backend;
    CompiledFunction f = compile(fn, options);
    const Tensor x = rand_range32({8, 6}, -1, 1, 61);
    lin.eval(), drop.eval(), bn.eval();
    std::vector<Tensor> got = f({x}), want = fn({x});
    EXPECT_TRUE(same_bits(got[0], want[0])) << backend;
    EXPECT_TRUE(testing::all_close(got[1], want[1], 1e-6, 1e-6)) << backend;
    drop.train();  // dropout active: about half the elements zero, the rest doubled
    got = f({x});
    const std::vector<double> h = got[0].to_vector(), plain = lin(x).to_vector();
    int zeros = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      zeros += h[i] == 0;
      EXPECT_TRUE(h[i] == 0 || std::abs(h[i] - 2 * plain[i]) < 1e-6) << backend << " " << i;
    }
    EXPECT_GT(zeros, 2) << backend;
    EXPECT_LT(zeros, int(h.size()) - 2) << backend;
    ASSERT_EQ(f.num_compiles(), 2) << backend;
    EXPECT_NE(f.recompile_reasons().back().find("module mode"), std::string::npos) << f.recompile_reasons().back();
    EXPECT_NE(f.recompile_reasons().back().find("eval -> training"), std::string::npos)
        << f.recompile_reasons().back();
    drop.eval();  // the eval plan again, no third compile
    got = f({x});
    EXPECT_TRUE(same_bits(got[0], lin(x))) << backend;
    EXPECT_EQ(f.num_compiles(), 2) << backend;
  }
}

// A module made inside the function on every call: its mode state outlives it (ASan sees any
// read of a destroyed module), and every call behaves as eager.
TEST(CompileState, AModuleMadeInsideTheFunctionIsNoDanglingGuard) {
  nn::Linear lin(3, 3);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    nn::Dropout drop(0.25);
    drop.eval();
    return std::vector<Tensor>{drop(lin(in[0]))};
  };
  CompiledFunction f = compile(fn, on("interpreter"));
  for (int call = 0; call < 3; ++call) {
    const Tensor x = rand_range32({2, 3}, -1, 1, uint64_t(70 + call));
    EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0])) << call;
  }
  EXPECT_EQ(f.num_compiles(), 1);
}

}  // namespace
}  // namespace smelt
