// smelt::compile against eager execution of the same function: elementwise groups bit for bit
// (the kernels evaluate the same scalar functions), reductions within a tolerance (they fold in
// another order), special values included; plus the plan's shape (how many kernels) and the
// signature cache.
#include "smelt/compile.h"

#include "codegen/kernel_cache.h"

#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

#include "ops/dispatch.h"
#include "support/check.h"
#include "support/temp_dir.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::interpreter_backend;

using testing::same_bits;
using testing::special_values;

using Fn = CompiledFunction::Fn;

void expect_matches_eager(const Fn& fn, const std::vector<Tensor>& inputs, bool exact,
                          const CompileOptions& options = interpreter_backend()) {
  CompiledFunction f = compile(fn, options);
  std::vector<Tensor> want = fn(inputs);
  for (int call = 0; call < 2; ++call) {  // the second call replays the plan
    std::vector<Tensor> got = f(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (exact) {
        EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i << ", call " << call << "\n"
                                                << f.report().plan;
      } else {
        EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-5, 1e-5)) << "output " << i << "\n"
                                                                     << f.report().plan;
      }
    }
  }
  EXPECT_EQ(f.num_compiles(), 1);
  EXPECT_EQ(f.report().interpreted_groups, 0) << f.report().plan;
}

TEST(Compile, ElementwiseChainIsOneKernelAndBitExact) {
  Tensor a = special_values({64, 33}, 2), b = special_values({33}, 3);
  Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(in[0] * a + b)}; };
  expect_matches_eager(fn, {special_values({64, 33}, 1)}, true);
  CompiledFunction f = compile(fn, interpreter_backend());
  f({special_values({64, 33}, 1)});
  EXPECT_EQ(f.report().kernels, 1) << f.report().plan;
  EXPECT_EQ(f.report().op_steps, 0) << f.report().plan;
}

// A value read only by a reshape that the function returns is written straight into the
// output's memory: no copy step for the reshape (a bias gradient summed to (1, N), returned as
// (N); once a kernel of its own in every training step). Both outputs equal eager's bits.
TEST(Compile, AReshapedOutputIsNotACopy) {
  const Fn fn = [](const std::vector<Tensor>& in) {
    const Tensor s = sum(in[0] * 2.0, {0}, true);                   // (1, 6)
    return std::vector<Tensor>{s.reshape({6}), exp(in[0]).reshape({3, 2, 2})};
  };
  for (const char* backend : {"interpreter", "cpp"}) {
    CompileOptions o;
    o.backend = backend;
    CompiledFunction f = compile(fn, o);
    const Tensor x = testing::random_tensor({2, 6}, -1, 1, 3).to(DType::Float32);
    const std::vector<Tensor> got = f({x}), want = fn({x});
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << backend << " " << k;
    const std::string plan = f.report().plan;
    EXPECT_EQ(plan.find("reshape"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("copy to output"), std::string::npos) << plan;
  }
}

TEST(Compile, ViewsInsideGroupsReadThroughStrides) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor t = in[0].permute({1, 0});    // [5, 4]
    Tensor s = in[1].slice(1, 1, 9, 2);  // [5, 4]
    return std::vector<Tensor>{relu(t * s) + in[2].expand({5, 4}), (t - 1.0).reshape({20})};
  };
  expect_matches_eager(
      fn, {special_values({4, 5}, 4), special_values({5, 9}, 5), special_values({1, 4}, 6)}, true);
}

// Attention's split of one projection into queries, keys and values (slices, a reshape into
// heads, permutes) reaches the matmuls as strided views of the projection's buffer: no step copies
// them (plan_build.cpp, strided_view), also with the queries scaled first (an elementwise op step
// reading the view), and the results are eager's bit for bit.
TEST(Compile, AttentionSplitReachesTheMatmulsWithoutCopies) {
  Tensor w = testing::random_tensor({32, 48}, -1, 1, 21).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor qkv = matmul(in[0], w);  // (16, 48)
    Tensor q = qkv.slice(1, 0, 16).reshape({16, 2, 8}) * 0.25;
    Tensor k = qkv.slice(1, 16, 32).reshape({16, 2, 8}).permute({1, 2, 0});
    Tensor v = qkv.slice(1, 32, 48).reshape({16, 2, 8}).permute({1, 0, 2});
    return std::vector<Tensor>{matmul(softmax(matmul(q.permute({1, 0, 2}), k), -1), v)};
  };
  Tensor x = testing::random_tensor({16, 32}, -1, 1, 22).to(DType::Float32);
  expect_matches_eager(fn, {x}, true);
  CompiledFunction f = compile(fn, interpreter_backend());
  f({x});
  const std::string plan = f.report().plan;
  for (const char* copy : {"kernel slice", "kernel reshape", "kernel permute"}) {
    EXPECT_EQ(plan.find(copy), std::string::npos) << copy << "\n" << plan;
  }
}

// The same with permute dims counted from the end (a review helper found them read as indices
// past the strides), one of them reshaped after the permute.
TEST(Compile, ViewChainsWithDimsCountedFromTheEnd) {
  Tensor w = testing::random_tensor({6, 5}, -1, 1, 23).to(DType::Float32);
  Tensor w2 = testing::random_tensor({4, 3}, -1, 1, 24).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor h = matmul(in[0], w);  // (8, 5)
    return std::vector<Tensor>{matmul(in[1], h.permute({-1, -2})),
                               matmul(h.permute({-1, -2}).reshape({5, 2, 4}), w2)};
  };
  expect_matches_eager(fn,
                       {testing::random_tensor({8, 6}, -1, 1, 25).to(DType::Float32),
                        testing::random_tensor({3, 5}, -1, 1, 26).to(DType::Float32)},
                       true);
}

TEST(Compile, IntegerAndBoolElementwise) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor m = gt(in[0], in[1]);
    return std::vector<Tensor>{where(m, in[0] * 3, in[1] - in[0]), m};
  };
  Tensor a = from_vector(std::vector<int64_t>{INT64_MAX, INT64_MIN, 0, -5, 7, 1}, {2, 3});
  Tensor b = from_vector(std::vector<int64_t>{1, -1, 0, 5, -7, 1}, {2, 3});
  expect_matches_eager(fn, {a, b}, true);
}

TEST(Compile, ReductionsWithPrologueAndEpilogue) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor x = in[0] * 2.0 + 1.0;
    return std::vector<Tensor>{sum(x, {1}), mean(exp(x), {0, 2}, true) * 3.0, amax(x, {2}),
                               amin(x, {1, 2})};
  };
  expect_matches_eager(fn, {testing::random_tensor({6, 7, 9}, -2, 2, 7).to(DType::Float32)}, false);
}

TEST(Compile, RowOpsAreOneKernelEach) {
  Tensor w = testing::random_tensor({48}, -1, 1, 9).to(DType::Float32);
  Tensor b = testing::random_tensor({48}, -1, 1, 10).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax(in[0] * 0.5, -1), log_softmax(in[0], 1),
                               layer_norm(in[0], {48}, w, b, 1e-5)};
  };
  Tensor x = testing::random_tensor({16, 48}, -4, 4, 8).to(DType::Float32);
  expect_matches_eager(fn, {x}, false);
}

TEST(Compile, SoftmaxOfSpecialRowsMatchesEager) {
  // Rows: all -inf, one +inf, one NaN, ordinary.
  std::vector<double> v(4 * 5, 0.5);
  for (int j = 0; j < 5; ++j) v[size_t(j)] = -INFINITY;
  v[7] = INFINITY;
  v[12] = std::nan("");
  Tensor x = from_vector(v, {4, 5}, DType::Float32);
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax(in[0], 1), log_softmax(in[0], 1)};
  };
  expect_matches_eager(fn, {x}, false);
}

TEST(Compile, MatmulWithBiasAndReluEpilogue) {
  Tensor w = testing::random_tensor({32, 24}, -1, 1, 11).to(DType::Float32);
  Tensor b = testing::random_tensor({24}, -1, 1, 12).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(matmul(in[0], w) + b)};
  };
  expect_matches_eager(fn, {testing::random_tensor({16, 32}, -1, 1, 13).to(DType::Float32)}, true);
}

TEST(Compile, InPlaceReuseKeepsResults) {
  // The pointwise kernel may write over the concatenation it reads (it dies there; same size,
  // read where written).
  Tensor w = testing::random_tensor({16, 16}, -1, 1, 22).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor c = cat({in[0], in[0] * 3.0}, 0);
    return std::vector<Tensor>{matmul(tanh(c) * 2.0, w)};
  };
  expect_matches_eager(fn, {special_values({8, 16}, 24)}, true);
  CompiledFunction f = compile(fn, interpreter_backend());
  f({special_values({8, 16}, 24)});
  EXPECT_NE(f.report().plan.find("1 in-place reuses"), std::string::npos) << f.report().plan;
}

TEST(Compile, WorkOnConstantsIsDoneOnceAtBuild) {
  // A frozen captured weight's transpose too large for the fold pass (90,000 elements > 65,536):
  // the plan computes it once, not on every call.
  Tensor w = testing::random_tensor({300, 300}, -1, 1, 25).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(matmul(in[0], w.t()))};
  };
  CompileOptions frozen = interpreter_backend();
  frozen.freeze = true;
  expect_matches_eager(fn, {testing::random_tensor({4, 300}, -1, 1, 26).to(DType::Float32)}, true,
                       frozen);
  CompiledFunction f = compile(fn, frozen);
  f({testing::random_tensor({4, 300}, -1, 1, 26).to(DType::Float32)});
  EXPECT_NE(f.report().plan.find("nodes computed once at build 1"), std::string::npos)
      << f.report().plan;
  EXPECT_EQ(f.report().plan.find("permute"), std::string::npos) << f.report().plan;
}

TEST(Compile, NoInPlaceReuseBetweenElementsOfDifferentSizes) {
  // Found in review: an f32 buffer of 2N elements sliced to N and cast to f64 has the output's
  // byte size and the same element positions, but writing f64 element i overwrites f32 elements
  // 2i and 2i + 1 before they are read.
  Tensor w = testing::random_tensor({4096, 3}, -1, 1, 28);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor s = sum(in[0], {0}).slice(0, 0, 4096);
    return std::vector<Tensor>{matmul(neg(s.to(DType::Float64)).reshape({1, 4096}), w)};
  };
  expect_matches_eager(fn, {testing::random_tensor({4, 8192}, -1, 1, 29).to(DType::Float32)},
                       false);
  CompiledFunction f = compile(fn, interpreter_backend());
  f({testing::random_tensor({4, 8192}, -1, 1, 29).to(DType::Float32)});
  EXPECT_NE(f.report().plan.find("0 in-place reuses"), std::string::npos) << f.report().plan;
}

// An input returned is the caller's tensor, as in eager code (compile_state_test.cpp has the
// views); a computed value returned twice is two tensors.
TEST(Compile, OutputsThatAreInputsAliasThemAndRepeatedOnesAreSeparateTensors) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] + 1.0;
    return std::vector<Tensor>{y, in[0], y};
  };
  Tensor x = testing::random_tensor({3, 4}, -1, 1, 14).to(DType::Float32);
  CompiledFunction f = compile(fn, interpreter_backend());
  std::vector<Tensor> out = f({x});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(same_bits(out[0], x + 1.0));
  EXPECT_TRUE(same_bits(out[1], x));
  EXPECT_TRUE(same_bits(out[2], x + 1.0));
  EXPECT_NE(out[0].raw_data(), out[2].raw_data());
  EXPECT_EQ(out[1].raw_data(), x.raw_data());
}

TEST(Compile, NewSignatureRecompilesAndSaysWhy) {
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0]) * 2.0}; };
  CompileOptions options = interpreter_backend();
  options.dynamic_batch = false;  // (tests/runtime/dynamic_batch_test.cpp: the reasons with it)
  CompiledFunction f = compile(fn, options);
  Tensor a = testing::random_tensor({64, 8}, -1, 1, 15).to(DType::Float32);
  Tensor b = testing::random_tensor({128, 8}, -1, 1, 16).to(DType::Float32);
  EXPECT_TRUE(same_bits(f({a})[0], fn({a})[0]));
  EXPECT_TRUE(same_bits(f({b})[0], fn({b})[0]));
  EXPECT_TRUE(same_bits(f({a})[0], fn({a})[0]));  // cached: no third compile
  EXPECT_EQ(f.num_compiles(), 2);
  ASSERT_EQ(f.recompile_reasons().size(), 1u);
  EXPECT_EQ(f.recompile_reasons()[0], "input 0 dim 0: 64 -> 128");
  EXPECT_TRUE(same_bits(f({a.to(DType::Float64)})[0], fn({a.to(DType::Float64)})[0]));
  EXPECT_EQ(f.recompile_reasons().back(), "input 0 dtype: float32 -> float64");
}

TEST(Compile, DropoutDrawsWhatEagerDraws) {
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{dropout(in[0] * 2.0, 0.5, true) + 1.0};
  };
  Tensor x = testing::random_tensor({32, 16}, -1, 1, 17).to(DType::Float32);
  CompiledFunction f = compile(fn, interpreter_backend());
  manual_seed(5);
  Tensor got = f({x})[0];
  const GeneratorState after = default_generator().state();
  manual_seed(5);
  Tensor want = fn({x})[0];
  EXPECT_TRUE(same_bits(got, want));
  EXPECT_TRUE(after == default_generator().state());
  EXPECT_FALSE(same_bits(f({x})[0], got));  // the stream moves on
}

TEST(Compile, RandomTensorsDrawnInsideAreAnErrorNotAConstant) {
  // randn inside the function would be drawn once at capture and replayed on every call.
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + randn(in[0].shape())};
  };
  CompiledFunction f = compile(fn, interpreter_backend());
  Tensor x = testing::random_tensor({4}, -1, 1, 18).to(DType::Float32);
  const GeneratorState before = default_generator().state();
  try {
    f({x});
    ADD_FAILURE() << "randn inside a compiled function ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draw them outside and pass them as inputs"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(before == default_generator().state());  // nothing was drawn
  EXPECT_EQ(randn({2}).numel(), 2);                    // and outside a trace randn works
}

// max_pool2d whose indices no one reads runs the values-only kernel in the plan (and in the IR
// interpreter): the same bits as eager, which computes the indices; when the indices are a graph
// output the plan still writes them.
TEST(Compile, MaxPoolWithUnreadIndicesMatchesEager) {
  Fn values = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(max_pool2d(in[0], 3, 2, 1)),
                               max_pool2d(in[0], {2, 3}, {1, 2}, {1, 0}, {1, 2}) * 2.0};
  };
  Fn both = [](const std::vector<Tensor>& in) {
    return ops::call(ops::OpId::max_pool2d, {in[0]},
                     {{"kernel", Shape{3, 3}},
                      {"stride", Shape{2, 2}},
                      {"padding", Shape{1, 1}},
                      {"dilation", Shape{1, 1}}});
  };
  for (uint64_t seed : {8, 9}) {
    expect_matches_eager(values, {special_values({2, 3, 13, 14}, seed, 5)}, true);
    expect_matches_eager(both, {special_values({2, 3, 13, 14}, seed, 5)}, true);
  }
}

TEST(Compile, ProfileCountsEveryStepOfEveryCall) {
  Tensor w = testing::random_tensor({8, 6}, -1, 1, 19).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax(relu(matmul(in[0], w)), 1)};
  };
  CompileOptions o = interpreter_backend();
  o.profile = true;
  CompiledFunction f = compile(fn, o);
  Tensor x = testing::random_tensor({4, 8}, -1, 1, 20).to(DType::Float32);
  for (int i = 0; i < 3; ++i) f({x});
  const std::string table = f.profile_table();
  EXPECT_NE(table.find("matmul"), std::string::npos) << table;
  int steps = 0, plan_steps = 0;
  for (size_t at = table.find("step "); at != std::string::npos; at = table.find("step ", at + 1))
    ++steps;
  const std::string& plan = f.report().plan;
  std::istringstream plan_lines(plan);
  for (std::string line; std::getline(plan_lines, line);) plan_steps += line.rfind("step ", 0) == 0;
  EXPECT_EQ(steps, plan_steps) << table << plan;
  // Every step row has 3 calls: the column after the name.
  std::istringstream rows(table);
  std::string line;
  while (std::getline(rows, line)) {
    if (line.rfind("step ", 0) != 0) continue;
    std::istringstream fields(line.substr(line.find_first_of(' ', 5)));
    std::string name_rest;
    long calls = 0;
    // the name may hold spaces: read tokens until the first integer column
    while (fields >> name_rest) {
      if (name_rest.find_first_not_of("0123456789") == std::string::npos) {
        calls = std::stol(name_rest);
        break;
      }
    }
    EXPECT_EQ(calls, 3) << line;
  }
  EXPECT_NE(f.arena_svg().find("<svg"), std::string::npos);
  CompiledFunction plain = compile(fn, interpreter_backend());
  plain({x});
  EXPECT_THROW(plain.profile_table(), Error);  // profiling was not asked for
}

TEST(Compile, BadInputsAreClearErrors) {
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1.0}; };
  CompiledFunction f = compile(fn, interpreter_backend());
  EXPECT_THROW(f({Tensor()}), Error);
  CompileOptions bad;
  bad.backend = "gpu";
  EXPECT_THROW(compile(fn, bad), Error);
  EXPECT_THROW(f.report(), Error);
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// The generated C++ backend against the interpreter backend on the same plans: elementwise
// outputs bit for bit, reductions within a tolerance (the generated loops fold in vector lanes).
// Each test runs in its own process (gtest_discover_tests), so the cache directory set here is
// the one KernelCache::global() reads.
class CompileCpp : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  }
};

void expect_cpp_matches_interpreter(const Fn& fn, const std::vector<Tensor>& inputs, bool exact) {
  CompileOptions cpp;
  cpp.backend = "cpp";
  CompiledFunction compiled = compile(fn, cpp), interpreted = compile(fn, interpreter_backend());
  std::vector<Tensor> want = interpreted(inputs);
  for (int call = 0; call < 2; ++call) {
    std::vector<Tensor> got = compiled(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (exact) {
        EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i << "\n" << compiled.report().plan;
      } else {
        EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-5, 1e-5)) << "output " << i;
      }
    }
  }
  EXPECT_NE(compiled.report().plan.find("[compiled]"), std::string::npos) << compiled.report().plan;
}

TEST_F(CompileCpp, ElementwiseViewsAndIntegersBitForBit) {
  Tensor a = special_values({64, 33}, 2);
  expect_cpp_matches_interpreter(
      [&](const std::vector<Tensor>& in) {
        Tensor t = in[0].permute({1, 0});
        return std::vector<Tensor>{gelu(in[0] * a + 0.5), relu(t) * sigmoid(t),
                                   where(gt(in[1], in[2]), in[1] * 3, in[2])};
      },
      {special_values({64, 33}, 1), testing::random_tensor({8}, -9, 9, 3).to(DType::Int64),
       testing::random_tensor({8}, -9, 9, 4).to(DType::Int64)},
      true);
}

TEST_F(CompileCpp, TieredStartsCompilingAtTheSecondCall) {
  // SMELT_COMPILE_AFTER's default: a function called once never pays the compiler.
  // A constant of this process: the kernel is in no disk cache yet (the global cache's directory is
  // whichever SMELT_CACHE_DIR the process saw first, possibly ~/.cache/smelt from an earlier run).
  const double c = 0.25 + double(getpid() % 4096) / 8192;
  Fn fn = [c](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * 1.5) + c}; };
  CompileOptions tiered;
  tiered.backend = "auto";
  CompiledFunction f = compile(fn, tiered);
  Tensor x = special_values({32, 32}, 27);
  const int64_t before = codegen::KernelCache::global().stats().misses;
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
  EXPECT_EQ(codegen::KernelCache::global().stats().misses, before);  // call 1: interpreter only
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
  // Call 2 queued the compile; the background pool counts it when it starts (wait for it: this
  // is not a timing assertion, a minute is only a bound on a hang).
  for (int i = 0; i < 6000 && codegen::KernelCache::global().stats().misses == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(codegen::KernelCache::global().stats().misses, before + f.report().kernels);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));  // whichever tier runs
}

TEST_F(CompileCpp, ReductionsAndRowOps) {
  Tensor w = testing::random_tensor({40}, -1, 1, 9).to(DType::Float32);
  expect_cpp_matches_interpreter(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{softmax(in[0] * 0.5, -1), layer_norm(in[0], {40}, w, w, 1e-5),
                                   mean(in[0], {0}), amax(in[0] + 1.0, {1}) / in[1]};
      },
      {special_values({24, 40}, 5), testing::random_tensor({24}, 1, 2, 6).to(DType::Float32)},
      false);
}

// A layer norm written out (mean, deviations, their mean, rsqrt, scale): one row kernel over three
// passes of each row (fusion: a later statistic of the same rows joins the group), on both
// backends; the sums run in another order than eager mean's, so within rounding.
TEST_F(CompileCpp, ALayerNormWrittenOutIsOneRowKernel) {
  Tensor w = testing::random_tensor({48}, -1, 1, 11).to(DType::Float32);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor d = in[0] - mean(in[0], {1}, true);
    return std::vector<Tensor>{d * rsqrt(mean(d * d, {-1}, true) + 1e-5) * w + 0.5};
  };
  Tensor x = testing::random_tensor({32, 48}, -3, 3, 12).to(DType::Float32);
  expect_cpp_matches_interpreter(fn, {x}, false);
  expect_matches_eager(fn, {x}, false);
  CompiledFunction f = compile(fn, interpreter_backend());
  f({x});
  EXPECT_EQ(f.report().kernels, 1) << f.report().plan;
  EXPECT_EQ(f.report().op_steps, 0) << f.report().plan;
}

// A logsumexp written out, log(sum(exp(x - m))) + m with m the row maximum, over a row of -inf:
// x - m is NaN there, so the result is NaN, as eager computes it. (The lowering's online softmax
// sum treats such a row as 0, which is right only inside the row ops it decomposes: the sum stays
// out of the maximum's group.) Rows with +inf and NaN too.
TEST_F(CompileCpp, AHandWrittenLogsumexpKeepsTheNaNOfARowOfMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(4 * 6, 0.0f);
  for (int j = 0; j < 6; ++j) v[size_t(j)] = -inf;  // row 0: every element -inf
  for (int j = 0; j < 6; ++j) v[size_t(6 + j)] = float(j) * 0.5f - 1;
  v[12] = inf;                                      // row 2: one +inf
  v[18] = std::numeric_limits<float>::quiet_NaN();  // row 3: one NaN
  Tensor x = from_vector(v, {4, 6});
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor m = amax(in[0], {1}, true);
    return std::vector<Tensor>{log(sum(exp(in[0] - m), {1}, true)) + m};
  };
  std::vector<Tensor> want = fn({x});
  for (const char* backend : {"interpreter", "cpp"}) {
    CompileOptions o;
    o.backend = backend;
    CompiledFunction f = compile(fn, o);
    std::vector<double> got = f({x})[0].to_vector(), ref = want[0].to_vector();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::isnan(got[i]), std::isnan(ref[i]))
          << backend << " row " << i << ": " << got[i] << " vs " << ref[i];
      if (!std::isnan(ref[i])) {
        EXPECT_NEAR(got[i], ref[i], 1e-5) << backend << " row " << i;
      }
    }
  }
  EXPECT_TRUE(std::isnan(want[0].to_vector()[0]));  // the reference itself: NaN for the -inf row
}

}  // namespace
}  // namespace smelt
