// Compiled plans with convolutions in the blocked channel layout (passes/blocked_layout.h,
// kernels/conv_blocked.h) against the same function compiled without the pass and run eagerly,
// on random inputs (each conv with at least 4096 output elements, the pass's floor): ResNet- and
// MobileNet-style blocks, a concat, global average pooling, channel
// counts that are not multiples of 16, batches above 1. The blocked convolutions run through
// oneDNN where the eager ones may take another implementation, so values agree to rounding (sums
// in another order), not bit for bit. Each test runs in its own process (gtest_discover_tests).
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/conv_onednn.h"
#include "smelt/compile.h"
#include "support/check.h"
#include "support/temp_dir.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::rand32;

using Fn = CompiledFunction::Fn;
using testing::all_close;
using testing::random_tensor;

// A conv weight scaled so that activations stay near 1 (1 / sqrt of the taps per output).
Tensor weight(const Shape& shape, uint64_t seed) {
  return rand32(shape, seed, 1.7 / std::sqrt(double(shape[1] * shape[2] * shape[3])));
}

// The weights these tests capture are constants (CompileOptions::freeze): the pass converts them
// to the blocked layout once, when the plan is built.
CompileOptions frozen() {
  CompileOptions o;
  o.freeze = true;
  return o;
}

std::string without_blocked_layout(std::string pipeline) {
  const std::string pass = "blocked_layout,";
  const size_t at = pipeline.find(pass);
  if (at != std::string::npos) pipeline.erase(at, pass.size());
  return pipeline;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class BlockedLayout : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
    if (kernels::onednn_version()[0] == '\0')
      GTEST_SKIP() << "built without oneDNN: nothing is blocked";
  }

  // Compiles fn with and without the pass, checks both against eager, and returns the blocked
  // plan's text. `conversions`: how many to_blocked + from_blocked steps the blocked plan may hold.
  std::string expect_matches_plain(const Fn& fn, const std::vector<Tensor>& inputs,
                                   size_t conversions) {
    const std::vector<Tensor> eager = fn(inputs);
    CompileOptions plain_options = frozen();
    plain_options.passes = without_blocked_layout(Graph::default_pipeline());
    CompiledFunction plain = compile(fn, plain_options);
    const std::vector<Tensor> want = plain(inputs);
    EXPECT_EQ(count(plain.report().plan, "blocked"), 0u) << plain.report().plan;
    std::string plan;
    for (const char* backend : {"interpreter", "cpp"}) {
      CompileOptions o = frozen();
      o.backend = backend;
      CompiledFunction f = compile(fn, o);
      for (int call = 0; call < 2; ++call) {  // the second call replays the plan
        const std::vector<Tensor> got = f(inputs);
        EXPECT_EQ(got.size(), eager.size());
        for (size_t i = 0; i < got.size() && i < eager.size(); ++i) {
          EXPECT_EQ(got[i].shape(), eager[i].shape());
          EXPECT_TRUE(all_close(got[i], want[i], 1e-4, 1e-5)) << backend << " output " << i << "\n"
                                                              << f.report().plan;
          EXPECT_TRUE(all_close(got[i], eager[i], 1e-4, 1e-5)) << backend << " output " << i;
        }
      }
      plan = f.report().plan;
      EXPECT_GT(count(plan, "conv2d_blocked"), 0u) << plan;
      EXPECT_EQ(count(plan, "conv2d"), count(plan, "conv2d_blocked")) << "a conv left plain\n"
                                                                      << plan;
      EXPECT_LE(count(plan, "to_blocked") + count(plan, "from_blocked"), conversions) << plan;
    }
    return plan;
  }
};

// conv3x3 + bias + relu, conv3x3 + bias, + the block's input, relu; twice (20 channels: the last
// block holds 4 real lanes of 16). The input converts once, the output once.
TEST_F(BlockedLayout, ResNetBlocksWithResidual) {
  const Tensor w1 = weight({20, 20, 3, 3}, 1), b1 = rand32({20}, 2), w2 = weight({20, 20, 3, 3}, 3),
               b2 = rand32({20}, 4);
  const Tensor w3 = weight({20, 20, 3, 3}, 5), w4 = weight({20, 20, 3, 3}, 6);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor y = relu(conv2d(relu(conv2d(x, w1, b1, 1, 1)), w2, b2, 1, 1) + x);
    Tensor z = relu(conv2d(relu(conv2d(y, w3, Tensor(), 1, 1)), w4, Tensor(), 1, 1) + y);
    return std::vector<Tensor>{z};
  };
  expect_matches_plain(fn, {rand32({2, 20, 12, 11}, 7)}, 2);
}

// ResNet's stem: a 7x7 stride-2 conv on RGB (NCHW in, blocked out), relu, a 3x3 stride-2 max pool
// on the blocked values, then a 3x3 conv to 24 channels: nothing converts before the output.
TEST_F(BlockedLayout, StemAndMaxPool) {
  const Tensor stem = weight({16, 3, 7, 7}, 61), b = rand32({16}, 62),
               w = weight({24, 16, 3, 3}, 63);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor y = max_pool2d(relu(conv2d(in[0], stem, b, 2, 3)), 3, 2, 1);
    return std::vector<Tensor>{relu(conv2d(y, w, Tensor(), 1, 1))};
  };
  const std::string plan = expect_matches_plain(fn, {rand32({2, 3, 46, 44}, 64)}, 1);
  EXPECT_EQ(count(plan, "max_pool2d_blocked"), 1u) << plan;
}

// MobileNetV2's inverted residual: 1x1 expand + relu6, depthwise 3x3 + relu6, 1x1 project, +x;
// then a stride-2 block without the residual; global average pooling at the end.
TEST_F(BlockedLayout, DepthwisePointwiseAndGlobalPool) {
  const Tensor we = weight({72, 24, 1, 1}, 11), be = rand32({72}, 12),
               wd = weight({72, 1, 3, 3}, 13);
  const Tensor bd = rand32({72}, 14), wp = weight({24, 72, 1, 1}, 15), bp = rand32({24}, 16);
  const Tensor we2 = weight({40, 24, 1, 1}, 17), wd2 = weight({40, 1, 3, 3}, 18),
               wp2 = weight({36, 40, 1, 1}, 19);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor h = clamp(conv2d(x, we, be), 0.0, 6.0);
    h = clamp(conv2d(h, wd, bd, 1, 1, 1, 72), 0.0, 6.0);
    Tensor y = conv2d(h, wp, bp) + x;
    Tensor g = clamp(conv2d(y, we2), 0.0, 6.0);
    g = clamp(conv2d(g, wd2, Tensor(), 2, 1, 1, 40), 0.0, 6.0);
    g = conv2d(g, wp2);
    return std::vector<Tensor>{mean(g, {2, 3}, false), mean(g, {-1, -2}, true)};
  };
  expect_matches_plain(fn, {rand32({3, 24, 14, 13}, 20)}, 3);
}

// A squeeze-excitation block (MobileNetV3, EfficientNet): the channel means of a blocked conv's
// output through a small FC (a matmul: plain layout) and a sigmoid scale that output, channel by
// channel, before the next conv. The scale (N, C, 1, 1) is converted to blocked (C values), not
// the (N, C, H, W) activation back to plain and again to blocked: four conversions in all (the
// input, the means, the scale, the output), not six. 40 channels: the last block has 8 real lanes.
TEST_F(BlockedLayout, SqueezeExcitationScalesBlockedValues) {
  const Tensor w1 = weight({40, 24, 3, 3}, 71), b1 = rand32({40}, 72), fc = rand32({40, 40}, 73, 0.3);
  const Tensor w2 = weight({24, 40, 1, 1}, 74);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor y = relu(conv2d(in[0], w1, b1, 1, 1));
    Tensor s = sigmoid(matmul(mean(y, {2, 3}), fc)).reshape({2, 40, 1, 1});
    return std::vector<Tensor>{conv2d(y * s, w2)};
  };
  expect_matches_plain(fn, {rand32({2, 24, 12, 12}, 75)}, 4);
}

// SqueezeNet's fire module: squeeze 1x1, then 1x1 and 3x3 expands concatenated on channels
// (the first a multiple of 16: the blocks line up), a conv after the concat; the concat is also
// returned (NCHW).
TEST_F(BlockedLayout, ConcatOnAlignedChannels) {
  const Tensor ws = weight({12, 24, 1, 1}, 31), we1 = weight({32, 12, 1, 1}, 32),
               we3 = weight({20, 12, 3, 3}, 33);
  const Tensor wn = weight({16, 52, 3, 3}, 34);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor s = relu(conv2d(in[0], ws));
    Tensor c = cat({relu(conv2d(s, we1)), relu(conv2d(s, we3, Tensor(), 1, 1))}, 1);
    return std::vector<Tensor>{relu(conv2d(c, wn, Tensor(), 1, 1)), c};
  };
  const std::string plan = expect_matches_plain(fn, {rand32({2, 24, 16, 16}, 35)}, 3);
  EXPECT_EQ(count(plan, "op cat (arena"), 1u) << plan;  // on blocked values, one step
}

// A DenseNet block: its input comes from an average pooling (which stays NCHW), and every layer
// concatenates it with all the layers' outputs so far, then batch norm (eval: a per-channel scale
// and shift), ReLU and a conv. The plain input joins the blocked concats through one conversion,
// however many concats read it; the batch norms run blocked; no concat is converted back.
TEST_F(BlockedLayout, DenseBlockConcatenatesAPlainInputOnce) {
  const Tensor stem = weight({32, 16, 3, 3}, 51);
  struct Norm {
    Tensor mean, var, gamma, beta;
  };
  std::vector<Tensor> ws;
  std::vector<Norm> norms;
  for (int64_t layer = 0; layer < 3; ++layer) {
    const int64_t c = 32 + 16 * layer;
    ws.push_back(weight({16, c, 3, 3}, 52 + uint64_t(layer)));
    Generator gen(60 + uint64_t(layer));
    norms.push_back({uniform({c}, -0.5, 0.5, DType::Float32, &gen), uniform({c}, 0.5, 2, DType::Float32, &gen),
                     uniform({c}, 0.5, 1.5, DType::Float32, &gen), uniform({c}, -0.5, 0.5, DType::Float32, &gen)});
  }
  const Fn fn = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> features{avg_pool2d(relu(conv2d(in[0], stem, Tensor(), 1, 1)), 2)};
    for (size_t layer = 0; layer < ws.size(); ++layer) {
      Tensor c = cat(features, 1);
      const Norm& n = norms[layer];
      const Tensor normed = batch_norm(c, n.mean, n.var, n.gamma, n.beta, /*training=*/false);
      features.push_back(conv2d(relu(normed), ws[layer], Tensor(), 1, 1));
    }
    return std::vector<Tensor>{cat(features, 1)};
  };
  // The input in; the stem's output out to the pool; the pooled value in once for every concat;
  // the first layer's normalized input in (a concat of one value is that value: its batch norm and
  // ReLU run plain before the conv); the block's output back out. Without the plain operand joining
  // the concats, each concat would be converted instead (6 here, 58 in DenseNet-121).
  const std::string plan = expect_matches_plain(fn, {rand32({1, 16, 32, 32}, 59)}, 5);
  EXPECT_EQ(count(plan, "to_blocked"), 3u) << plan;
  EXPECT_EQ(count(plan, "batch_norm"), 0u) << plan;
}

// A stem (3 input channels) reads its input on NCHW and writes blocked values (no to_blocked);
// float64 convolutions stay plain; exp (not finite on finite inputs) runs on NCHW between two
// blocked convs.
TEST_F(BlockedLayout, NegativeCasesStayPlain) {
  const Tensor stem = weight({16, 3, 3, 3}, 41), w = weight({16, 16, 3, 3}, 42),
               w2 = weight({16, 16, 1, 1}, 43);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor y = conv2d(relu(conv2d(in[0], stem, Tensor(), 1, 1)), w, Tensor(), 1, 1);
    return std::vector<Tensor>{conv2d(exp(y * 0.1), w2)};
  };
  const std::vector<Tensor> inputs = {rand32({1, 3, 24, 24}, 44)};
  const std::vector<Tensor> eager = fn(inputs);
  CompiledFunction f = compile(fn, frozen());
  const std::vector<Tensor> got = f(inputs);
  EXPECT_TRUE(all_close(got[0], eager[0], 1e-4, 1e-5));
  const std::string plan = f.report().plan;
  EXPECT_EQ(count(plan, "conv2d_blocked"), 3u) << plan;
  EXPECT_EQ(count(plan, "to_blocked"), 1u) << plan;
  EXPECT_EQ(count(plan, "from_blocked"), 2u) << plan;

  const Fn f64 = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(conv2d(in[0], w.to(DType::Float64), Tensor(), 1, 1))};
  };
  CompiledFunction g = compile(f64, frozen());
  g({rand32({1, 16, 24, 24}, 45).to(DType::Float64)});
  EXPECT_EQ(count(g.report().plan, "blocked"), 0u) << g.report().plan;
}

// SMELT_BLOCKED_LAYOUT=0 leaves every conv plain; so does the pass for convs below its floor.
TEST_F(BlockedLayout, SmallConvsStayPlain) {
  const Tensor w = weight({16, 16, 3, 3}, 53);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(conv2d(in[0], w, Tensor(), 1, 1))};
  };
  CompiledFunction f = compile(fn, frozen());
  f({rand32({1, 16, 15, 17}, 54)});  // 16 * 15 * 17 = 4080 output elements
  EXPECT_EQ(count(f.report().plan, "blocked"), 0u) << f.report().plan;
}

// One conv large enough for the layout, and nothing else to share its conversions with: plain.
// The same conv followed by a second one is blocked (the pass is on).
TEST_F(BlockedLayout, ALoneConvStaysPlain) {
  const Tensor w = weight({16, 16, 3, 3}, 55), w2 = weight({16, 16, 1, 1}, 56);
  const Tensor x = rand32({1, 16, 24, 24}, 57);
  const Fn lone = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(conv2d(in[0], w, Tensor(), 1, 1))};
  };
  CompiledFunction f = compile(lone, frozen());
  f({x});
  EXPECT_EQ(count(f.report().plan, "blocked"), 0u) << f.report().plan;
  const Fn two = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv2d(relu(conv2d(in[0], w, Tensor(), 1, 1)), w2)};
  };
  expect_matches_plain(two, {x}, 2);
}

TEST_F(BlockedLayout, SwitchedOffByEnvironment) {
  setenv("SMELT_BLOCKED_LAYOUT", "0", 1);
  const Tensor w = weight({16, 16, 3, 3}, 51);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(conv2d(in[0], w, Tensor(), 1, 1))};
  };
  CompiledFunction f = compile(fn, frozen());
  f({rand32({1, 16, 24, 24}, 52)});
  EXPECT_EQ(count(f.report().plan, "blocked"), 0u) << f.report().plan;
  unsetenv("SMELT_BLOCKED_LAYOUT");
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// The blocked conv's epilogue as oneDNN post-ops (runtime/contraction_step.h
// conv_epilogue_as_post_ops): bias + relu, bias + ReLU6 as maximum/minimum, and a clamp, each
// against the plain pipeline and eager on moderate inputs; with a NaN and infinities in the input
// the post-ops must step aside (oneDNN's clamp would turn NaN into 0): NaN stays where the plain
// path has it. An epilogue with a residual add is taken (a binary post-op); one whose product is
// also returned is not.
TEST_F(BlockedLayout, EpilogueAsPostOps) {
  const Tensor w1 = weight({32, 16, 1, 1}, 61), b1 = rand32({32}, 62),
               w2 = weight({32, 32, 3, 3}, 63);
  const Tensor b2 = rand32({32}, 64), w3 = weight({32, 32, 3, 3}, 65),
               w4 = weight({16, 32, 1, 1}, 66);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor a = relu(conv2d(in[0], w1, b1));  // expand: x smaller than y
    Tensor r6 = minimum(maximum(conv2d(a, w2, b2, 1, 1), full({}, 0.0)), full({}, 6.0));  // ReLU6
    Tensor c = clamp(conv2d(r6, w3, Tensor(), 1, 1), -0.5, 1.5);
    return std::vector<Tensor>{conv2d(c, w4)};
  };
  const std::string plan = expect_matches_plain(fn, {rand32({1, 16, 20, 20}, 67)}, 2);
  EXPECT_EQ(count(plan, "as oneDNN post-ops"), 3u) << plan;

  // NaN and infinities: every conv reads one (directly or through its producer); the plain path's
  // NaNs must survive the blocked one.
  Tensor x = rand32({1, 16, 20, 20}, 68);
  x.data<float>()[5] = NAN;
  x.data<float>()[400 * 3 + 57] = INFINITY;
  x.data<float>()[400 * 9 + 222] = -INFINITY;
  CompileOptions plain_options = frozen();
  plain_options.passes = without_blocked_layout(Graph::default_pipeline());
  const Tensor want = compile(fn, plain_options)({x})[0];
  CompiledFunction f = compile(fn, frozen());
  const Tensor got = f({x})[0];
  EXPECT_TRUE(all_close(got, want, 1e-4, 1e-5)) << f.report().plan;
  int64_t nans = 0;
  for (int64_t i = 0; i < want.numel(); ++i) nans += std::isnan(want.data<float>()[i]);
  EXPECT_GT(nans, 0);

  const Fn residual = [&](const std::vector<Tensor>& in) {
    Tensor p = conv2d(in[0], w1, b1);
    return std::vector<Tensor>{relu(conv2d(relu(p), w2, b2, 1, 1) + p), p};
  };
  const std::string plan2 = expect_matches_plain(residual, {rand32({1, 16, 20, 20}, 69)}, 3);
  EXPECT_EQ(count(plan2, "as oneDNN post-ops"), 1u) << plan2;
  EXPECT_EQ(count(plan2, "[bias/residual/clamp as oneDNN post-ops]"), 1u) << plan2;
}

// A residual add as oneDNN's binary post-op: conv + bias, + the residual, then relu (ResNet's
// block end) and with no activation (MobileNetV2's), batch 2, 24 channels (the last block half
// padding); both against the plain pipeline and eager, and counted as taken at run time. A
// residual holding NaN or an infinity (a graph input's, where this conv's input is moderate)
// makes the post-ops step aside: the NaNs stay where the plain path has them. And a residual that
// comes after the relu (relu(conv) + r) or before the bias is not a post-op in oneDNN's order.
TEST_F(BlockedLayout, ResidualAddAsPostOp) {
  const Tensor w1 = weight({24, 16, 3, 3}, 81), b1 = rand32({24}, 82),
               w2 = weight({24, 16, 1, 1}, 83);
  const Tensor b2 = rand32({24}, 84), w3 = weight({24, 24, 3, 3}, 85);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor r = conv2d(in[1], w2, b2);                  // the residual, also returned
    Tensor y = relu(conv2d(in[0], w1, b1, 1, 1) + r);  // bias, residual, relu
    Tensor z = conv2d(y, w3, Tensor(), 1, 1) + y;      // residual alone (y is the conv's input too)
    return std::vector<Tensor>{z, r};
  };
  const uint64_t taken_before = kernels::onednn_residual_post_ops();
  const std::string plan =
      expect_matches_plain(fn, {rand32({2, 16, 16, 16}, 86), rand32({2, 16, 16, 16}, 87)}, 4);
  EXPECT_EQ(count(plan, "[bias/residual/clamp as oneDNN post-ops]"), 2u) << plan;
  // Two steps, two backends, two calls each: every one took its residual as a post-op.
  EXPECT_EQ(kernels::onednn_residual_post_ops() - taken_before, 8u);

  CompileOptions plain_options = frozen();
  plain_options.passes = without_blocked_layout(Graph::default_pipeline());
  CompiledFunction plain = compile(fn, plain_options), blocked = compile(fn, frozen());
  const Tensor x = rand32({2, 16, 16, 16}, 88);
  Tensor bad = rand32({2, 16, 16, 16}, 89);
  bad.data<float>()[17] = NAN;
  bad.data<float>()[256 * 4 + 100] = INFINITY;
  bad.data<float>()[256 * 12 + 3] = -INFINITY;
  int64_t nans = 0;
  for (const Tensor& r_in : {bad, rand32({2, 16, 16, 16}, 90), bad}) {  // bad, moderate, bad again
    const Tensor want = plain({x, r_in})[0];
    const uint64_t before = kernels::onednn_residual_post_ops();
    const Tensor got = blocked({x, r_in})[0];
    EXPECT_EQ(kernels::onednn_residual_post_ops() - before,
              r_in.data<float>() == bad.data<float>() ? 0u : 2u);
    EXPECT_TRUE(all_close(got, want, 1e-4, 1e-5)) << blocked.report().plan;
    int64_t same = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      nans += std::isnan(want.data<float>()[i]);
      same += std::isnan(want.data<float>()[i]) == std::isnan(got.data<float>()[i]);
    }
    EXPECT_EQ(same, want.numel()) << "NaN where the plain path has none, or none where it has one";
  }
  EXPECT_GT(nans, 0);

  const Fn after_relu = [&](const std::vector<Tensor>& in) {
    Tensor r = conv2d(in[1], w2, b2);
    return std::vector<Tensor>{relu(conv2d(in[0], w1, b1, 1, 1)) + r,
                               conv2d(in[0], w1, Tensor(), 1, 1) + r + b1.reshape({24, 1, 1})};
  };
  const std::string plan2 = expect_matches_plain(
      after_relu, {rand32({1, 16, 16, 16}, 91), rand32({1, 16, 16, 16}, 92)}, 4);
  EXPECT_EQ(count(plan2, "residual"), 0u) << plan2;
}

// A MobileNetV2 inverted residual: expand (ReLU6) -> depthwise stride 2 (ReLU6) -> project. The
// depthwise and the projection read more than they write, so they scan no input of their own:
// each trusts its producer's clamp to moderate bounds (kernels/conv.h PlanStepScope), which holds
// only where that clamp ran in oneDNN. With NaN and infinities in the input the expand's scan
// fails, its own epilogue keeps the NaNs, and nothing downstream may take them for moderate.
TEST_F(BlockedLayout, PostOpsTrustTheStepBeforeOnlyWhenItClamped) {
  const Tensor w1 = weight({96, 16, 1, 1}, 71), b1 = rand32({96}, 72),
               w2 = weight({96, 1, 3, 3}, 73);
  const Tensor b2 = rand32({96}, 74), w3 = weight({24, 96, 1, 1}, 75), b3 = rand32({24}, 76);
  auto relu6 = [](const Tensor& t) { return minimum(maximum(t, full({}, 0.0)), full({}, 6.0)); };
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor e = relu6(conv2d(in[0], w1, b1));
    Tensor d = relu6(conv2d(e, w2, b2, 2, 1, 1, 96));
    return std::vector<Tensor>{conv2d(d, w3, b3)};
  };
  const std::string plan = expect_matches_plain(fn, {rand32({1, 16, 32, 32}, 77)}, 2);
  EXPECT_EQ(count(plan, "as oneDNN post-ops"), 3u) << plan;

  CompileOptions plain_options = frozen();
  plain_options.passes = without_blocked_layout(Graph::default_pipeline());
  CompiledFunction plain = compile(fn, plain_options), blocked = compile(fn, frozen());
  for (int round = 0; round < 2; ++round) {
    Tensor x = rand32({1, 16, 32, 32}, 78 + uint64_t(round));
    x.data<float>()[7] = NAN;
    x.data<float>()[1024 * 5 + 300] = INFINITY;
    x.data<float>()[1024 * 11 + 901] = -INFINITY;
    x.data<float>()[1024 * 2 + 64] = -0.0f;
    for (int call = 0; call < 2; ++call) {  // after a moderate run, then again
      const Tensor want = plain({x})[0], got = blocked({x})[0];
      EXPECT_TRUE(all_close(got, want, 1e-4, 1e-5)) << blocked.report().plan;
      int64_t nans = 0, same = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const bool n = std::isnan(want.data<float>()[i]);
        nans += n;
        same += n == std::isnan(got.data<float>()[i]);
      }
      EXPECT_GT(nans, 0);
      EXPECT_EQ(same, want.numel())
          << "NaN where the plain path has none, or none where it has one";
      (void)blocked({rand32({1, 16, 32, 32}, 90)});  // a moderate run in between
    }
  }
}

}  // namespace
}  // namespace smelt
