// Dynamic dims beyond the batch (CompileOptions::dynamic_batch, dynamic_dims; issue 22): a
// sequence length, two symbols at once, dims marked dynamic up front. Every call against eager
// execution; the number of compiles and the recompile reasons; functions whose graph depends on a
// dim beyond a polynomial fall back to specialized kernels and say why.
#include <cmath>
#include <cstdlib>
#include <thread>

#include "codegen/kernel_cache.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "support/check.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using Fn = CompiledFunction::Fn;

constexpr int64_t kModel = 16, kHeads = 2;

Tensor param(const Shape& shape, uint64_t seed) {
  return testing::random_tensor(shape, -0.4, 0.4, seed).to(DType::Float32);
}

// A transformer block's attention: x [B, S, 16] and an additive mask [S, S] (causal); two heads,
// scores scaled, masked and softmaxed over the keys, a residual and a layer norm.
struct Attention {
  Tensor wq = param({kModel, kModel}, 1), wk = param({kModel, kModel}, 2), wv = param({kModel, kModel}, 3);
  Tensor wo = param({kModel, kModel}, 4), g = param({kModel}, 5) + 1.0;

  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    const Tensor& x = in[0];
    const int64_t b = x.shape()[0], s = x.shape()[1], dh = kModel / kHeads;
    auto heads = [&](const Tensor& w) { return linear(x, w).reshape({b, s, kHeads, dh}).permute({0, 2, 1, 3}); };
    const Tensor q = heads(wq), k = heads(wk), v = heads(wv);
    const Tensor scores = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(dh))) + in[1];
    const Tensor ctx = matmul(softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({b, s, kModel});
    return {layer_norm(x + linear(ctx, wo), {kModel}, g), mean(ctx, {1})};
  }
};

Tensor causal_mask(int64_t s) {
  std::vector<double> m(size_t(s * s));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < s; ++j) m[size_t(i * s + j)] = j > i ? -1e9 : 0.0;
  }
  return from_vector(m, {s, s}).to(DType::Float32);
}

void expect_matches_eager(const Fn& fn, CompiledFunction& f, const std::vector<Tensor>& in, const std::string& what) {
  const std::vector<Tensor> want = fn(in);
  for (int call = 0; call < 2; ++call) {  // the second call replays the plan
    const std::vector<Tensor> got = f(in);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape()) << what << " output " << o;
      EXPECT_TRUE(testing::all_close(got[o], want[o], 1e-5, 1e-5)) << what << " output " << o << "\n"
                                                                    << f.report().plan;
    }
  }
}

class DynamicDims : public testing::TempDirTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  }
};

// Issue 22's measure: an attention block called at 10 (batch, sequence) sizes compiled 9 times,
// and the reason named dim 0 when dim 1 changed. Now: the first size specialized, the second
// makes the batch dynamic, the third (a new sequence length) adds the sequence: 3 compiles.
TEST_P(DynamicDims, AttentionAtTenBatchAndSequenceSizesCompilesThreeTimes) {
  const Attention attention;
  const Fn fn = [&](const std::vector<Tensor>& in) { return attention(in); };
  CompileOptions options;
  options.backend = GetParam();
  CompiledFunction f = compile(fn, options);
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{2, 8}, {4, 8},  {4, 12}, {1, 5},  {3, 33},
                                                          {2, 8}, {7, 1},  {1, 64}, {5, 17}, {4, 12}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto [b, s] = sizes[i];
    const Tensor x = testing::random_tensor({b, s, kModel}, -1, 1, 100 + i).to(DType::Float32);
    expect_matches_eager(fn, f, {x, causal_mask(s)}, "B=" + std::to_string(b) + " S=" + std::to_string(s));
    EXPECT_EQ(f.report().dynamic_batch, i > 0 && sizes[i] != sizes[0]) << "B=" << b << " S=" << s << ": "
                                               << (f.recompile_reasons().empty() ? "" : f.recompile_reasons().back());
  }
  EXPECT_EQ(f.num_compiles(), 3) << ::testing::PrintToString(f.recompile_reasons());
  const std::vector<std::string> reasons = f.recompile_reasons();
  ASSERT_GE(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "input 0 dim 0: 2 -> 4 (dynamic S0 = input 0 dim 0: kernels compiled once for every size)");
  EXPECT_EQ(reasons[1],
            "input 0 dim 1: 8 -> 12; input 1 dim 0: 8 -> 12, dim 1: 8 -> 12 (dynamic S0 = input 0 dim 0, "
            "S1 = input 0 dim 1 and input 1 dim 0 and input 1 dim 1: kernels compiled once for every size)");
}

// Dims marked dynamic up front compile the dynamic-shape kernels at the first call: one compile
// for every size, no compiler run for later ones.
TEST_P(DynamicDims, MarkedDimsCompileOnce) {
  const Attention attention;
  const Fn fn = [&](const std::vector<Tensor>& in) { return attention(in); };
  CompileOptions options;
  options.backend = GetParam();
  options.dynamic_dims = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  CompiledFunction f = compile(fn, options);
  int64_t runs = -1;
  for (const auto& [b, s] : std::vector<std::pair<int64_t, int64_t>>{{3, 6}, {1, 9}, {6, 2}, {2, 31}}) {
    const Tensor x = testing::random_tensor({b, s, kModel}, -1, 1, uint64_t(b * s)).to(DType::Float32);
    expect_matches_eager(fn, f, {x, causal_mask(s)}, "B=" + std::to_string(b) + " S=" + std::to_string(s));
    EXPECT_TRUE(f.report().dynamic_batch);
    const int64_t now = int64_t(codegen::KernelCache::global().stats().compiler_runs);
    if (runs >= 0) {
      EXPECT_EQ(now, runs) << "B=" << b << " S=" << s;
    }
    runs = now;
  }
  EXPECT_EQ(f.num_compiles(), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, DynamicDims, ::testing::Values("interpreter", "cpp"));

// The dynamic-batch tests' adversarial cases for a sequence dim (dim 1): a view that exists only
// at S = 1, a constant that depends on S (a mean's 1 / S, S * S), a reduction over S, a slice to
// a fixed length that is a no-op at the probe sizes, a reshape that needs S even.
TEST(DynamicDimsSequence, AdversarialSequenceFunctionsMatchEager) {
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"mean over S, S * S", [](const std::vector<Tensor>& in) {
         const double s = double(in[0].shape()[1]);
         return std::vector<Tensor>{mean(in[0], {1}) * (s * s), sum(exp(in[0]), {1})};
       }},
      {"view at S = 1", [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{(in[0] * 2.0).permute({1, 0, 2}).reshape({-1, 6}) + 1.0};
       }},
      {"slice to 40", [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{slice(in[0], 1, 0, 40) * 3.0};
       }},
      {"reshape halving S", [](const std::vector<Tensor>& in) {
         const Shape& s = in[0].shape();
         return std::vector<Tensor>{sum(in[0].reshape({s[0], 2, -1, s[2]}), {1}) - 1.0};
       }},
  };
  for (const char* backend : {"interpreter", "cpp"}) {
    for (const auto& [name, fn] : fns) {
      CompileOptions options;
      options.backend = backend;
      CompiledFunction f = compile(fn, options);
      for (int64_t s : {8, 10, 1, 50, 2, 64, 10}) {
        const Tensor x = testing::random_tensor({3, s, 6}, -1, 1, uint64_t(s)).to(DType::Float32);
        std::vector<Tensor> want, got;
        try {
          got = f({x});
        } catch (const Error& e) {
          // eager refuses too (an odd S for the halving reshape): the same error class
          EXPECT_THROW(fn({x}), Error) << name << " S=" << s << ": " << e.what();
          continue;
        }
        want = fn({x});
        ASSERT_EQ(got.size(), want.size());
        for (size_t o = 0; o < got.size(); ++o) {
          ASSERT_EQ(got[o].shape(), want[o].shape()) << name << " " << backend << " S=" << s;
          EXPECT_TRUE(testing::all_close(got[o], want[o], 1e-5, 1e-5)) << name << " " << backend << " S=" << s;
        }
      }
      for (const std::string& r : f.recompile_reasons()) {
        EXPECT_EQ(r.find("input 0 dim 0"), std::string::npos) << name << ": the batch never changed: " << r;
      }
    }
  }
}

// The view at S = 1 is specialized there and says so; the slice to 40 is dynamic below 40 only.
TEST(DynamicDimsSequence, SizesWhereTheGraphDiffersAreSpecializedWithAReason) {
  const Fn slice40 = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{slice(in[0], 1, 0, 40) * 3.0}; };
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(slice40, options);
  for (int64_t s : {8, 10, 30, 64}) {
    const Tensor x = testing::random_tensor({2, s, 3}, -1, 1, uint64_t(s)).to(DType::Float32);
    EXPECT_TRUE(testing::same_bits(f({x})[0], slice40({x})[0])) << s;
    EXPECT_EQ(f.report().dynamic_batch, s == 10 || s == 30) << s;
  }
  const std::vector<std::string> reasons = f.recompile_reasons();
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_NE(reasons[2].find("input 0 dim 1: 30 -> 64 (not dynamic at this size: "), std::string::npos) << reasons[2];
  EXPECT_NE(reasons[2].find("S0=64"), std::string::npos) << reasons[2];
}

// Found by the fuzzer (the class dim varying): a target class the function makes (1) is in range
// at every probe and out of range at 1 class. The fitted kernel would read past its buffer: that
// size is specialized, where the call gives eager's error (it was an internal error).
TEST(DynamicDimsSequence, AConstantIndexOutOfRangeAtANewSizeGivesEagersError) {
  const Fn fn = [](const std::vector<Tensor>& in) {
    const Tensor target = full({in[0].shape()[0]}, 1, DType::Int64);
    return std::vector<Tensor>{nll_loss(log_softmax(in[0], -1), target)};
  };
  for (const char* backend : {"interpreter", "cpp"}) {
    CompileOptions options;
    options.backend = backend;
    CompiledFunction f = compile(fn, options);
    for (int64_t classes : {4, 6, 9, 1, 3}) {
      const Tensor x = testing::random_tensor({5, classes}, -2, 2, uint64_t(classes)).to(DType::Float32);
      if (classes == 1) {
        EXPECT_THROW(fn({x}), Error);
        try {
          f({x});
          ADD_FAILURE() << backend << ": no error at 1 class";
        } catch (const Error& e) {
          EXPECT_FALSE(e.internal()) << backend << ": " << e.what();
        }
        continue;
      }
      EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6)) << backend << " " << classes;
      EXPECT_EQ(f.report().dynamic_batch, classes != 4) << backend << " " << classes;
    }
  }
}

TEST(DynamicDimsOptions, BadMarksAreClearErrors) {
  const Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1.0}; };
  const Tensor x = testing::random_tensor({2, 3}, -1, 1, 1).to(DType::Float32);
  CompileOptions options;
  options.backend = "interpreter";
  options.dynamic_dims = {{0, 2}};
  CompiledFunction f = compile(fn, options);
  testing::expect_error([&] { f({x}); }, {"dynamic_dims names input 0 dim 2", "f32(2, 3)", "valid"});
  options.dynamic_dims = {{0, -3}};
  CompiledFunction too_low = compile(fn, options);
  testing::expect_error([&] { too_low({x}); }, {"dynamic_dims names input 0 dim -3", "from the end"});
  options.dynamic_dims = {{0, -1}};  // the last dim, as Python counts
  CompiledFunction last = compile(fn, options);
  for (int64_t s : {3, 7, 2}) {
    const Tensor y = testing::random_tensor({2, s}, -1, 1, uint64_t(s)).to(DType::Float32);
    EXPECT_TRUE(testing::same_bits(last({y})[0], fn({y})[0])) << s;
    EXPECT_TRUE(last.report().dynamic_batch) << s;
  }
  EXPECT_EQ(last.num_compiles(), 1);
  options.dynamic_dims = {{1, 0}};
  CompiledFunction g = compile(fn, options);
  testing::expect_error([&] { g({x}); }, {"dynamic_dims names input 1 dim 0"});
  options.dynamic_dims = {{0, 0}};
  options.dynamic_batch = false;
  testing::expect_error([&] { compile(fn, options); }, {"dynamic_dims needs dynamic_batch"});
  // an empty dim cannot be marked
  options.dynamic_batch = true;
  CompiledFunction h = compile(fn, options);
  testing::expect_error([&] { h({zeros({0, 3})}); }, {"has size 0", "size >= 1"});
}

// More sizes varying than symbols allowed: specialized, saying why.
TEST(DynamicDimsOptions, TooManyVaryingSizesAreSpecializedWithAReason) {
  const Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0], {1, 3}) * 2.0}; };
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(fn, options);
  for (const Shape& s : {Shape{2, 3, 4, 5}, Shape{3, 4, 5, 6}}) {
    const Tensor x = testing::random_tensor(s, -1, 1, 2).to(DType::Float32);
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6));
  }
  ASSERT_EQ(f.recompile_reasons().size(), 1u);
  EXPECT_NE(f.recompile_reasons()[0].find("(not dynamic: 4 sizes vary; at most 3 can be symbolic"), std::string::npos)
      << f.recompile_reasons()[0];
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Found in review: with dynamic_dims, the entry's key was made before the probe traces read the
// module modes, so the next call at another size never matched it and compiled specialized.
TEST(DynamicDimsModes, MarkedDimsWithAModuleKeepOneCompile) {
  nn::Linear lin(6, 4);
  nn::Dropout drop(0.5);
  drop.eval();
  const Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{drop(lin(in[0]))}; };
  CompileOptions options;
  options.backend = "interpreter";
  options.dynamic_dims = {{0, 0}};
  CompiledFunction f = compile(fn, options);
  for (int64_t b : {3, 5, 9, 3}) {
    const Tensor x = testing::random_tensor({b, 6}, -1, 1, uint64_t(b)).to(DType::Float32);
    EXPECT_TRUE(testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6)) << b;
    EXPECT_TRUE(f.report().dynamic_batch) << b << ": " << ::testing::PrintToString(f.recompile_reasons());
  }
  EXPECT_EQ(f.num_compiles(), 1) << ::testing::PrintToString(f.recompile_reasons());
}

// Found in review: the function traced at a probe size may fail in its own code (a table indexed
// by the sequence length); the call falls back to a specialized compile instead of failing.
TEST(DynamicDimsModes, AFunctionThatFailsAtAProbeSizeIsSpecialized) {
  const std::vector<double> table(12, 0.5);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * table.at(size_t(in[0].shape()[1]))};  // throws past 11
  };
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(fn, options);
  for (int64_t s : {4, 8, 10}) {
    const Tensor x = testing::random_tensor({2, s}, -1, 1, uint64_t(s)).to(DType::Float32);
    EXPECT_TRUE(testing::same_bits(f({x})[0], fn({x})[0])) << s;
  }
  const std::vector<std::string> reasons = f.recompile_reasons();
  ASSERT_FALSE(reasons.empty());
  EXPECT_NE(reasons[0].find("the function fails at a probe size"), std::string::npos) << reasons[0];
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Threads calling one compiled function at different sizes at once: the plans per size, the
// shared kernel handles (the interpreter's programs per size, "auto" before the compiles finish)
// and the LRU (2 plans kept for 4 sizes) under concurrent calls, every result equal to eager.
TEST(DynamicDimsThreads, ConcurrentCallsAtDifferentSizesMatchEager) {
  const Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax(in[0] * 2.0, -1) + sum(in[0], {1}, true)};
  };
  CompileOptions options;  // backend "auto": interpreted until the background compiles finish
  options.batch_plans = 2;
  options.dynamic_dims = {{0, 0}, {0, 1}};
  CompiledFunction f = compile(fn, options);
  f({testing::random_tensor({2, 3}, -1, 1, 1).to(DType::Float32)});
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const int64_t b = 1 + (t + i) % 4, s = 2 + 3 * t;
        const Tensor x = testing::random_tensor({b, s}, -3, 3, uint64_t(100 * t + i)).to(DType::Float32);
        if (!testing::all_close(f({x})[0], fn({x})[0], 1e-6, 1e-6)) ++wrong[size_t(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[size_t(t)], 0) << "thread " << t;
  EXPECT_EQ(f.num_compiles(), 1);
}

}  // namespace
}  // namespace smelt
