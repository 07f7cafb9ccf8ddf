// Data-parallel training (smelt/distributed.h), run by ctest under `mpirun -np 2` and `-np 3`
// (and as one process, where the world is that process). Every rank runs every test; each test
// calls the same collectives in the same order on every rank.
//
// The central check: W ranks, each training on its slice of a global batch, end with the
// parameters that one process training on the whole (concatenated) batch ends with: the loss is a
// mean, the slices have equal sizes, so the mean of the ranks' gradients is the global gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "smelt/distributed.h"
#include "smelt/smelt.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

namespace dist = distributed;

int R() { return dist::rank(); }
int W() { return dist::world_size(); }

// ---- collectives

TEST(Collectives, AllReduceEveryOpAndDtype) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max, dist::ReduceOp::Min}) {
      if (op == dist::ReduceOp::Mean && dtype == DType::Int64) continue;
      std::vector<double> mine;
      for (int i = 0; i < 6; ++i) mine.push_back(double((R() + 1) * (i + 1)));
      Tensor t = from_vector(mine, {3, 2}).to(dtype);
      dist::all_reduce(t, op);
      const std::vector<double> got = t.to_vector();
      for (int i = 0; i < 6; ++i) {
        const double base = i + 1, w = W();
        const double want = op == dist::ReduceOp::Sum    ? base * w * (w + 1) / 2
                            : op == dist::ReduceOp::Mean ? base * (w + 1) / 2
                            : op == dist::ReduceOp::Max  ? base * w
                                                         : base;
        EXPECT_DOUBLE_EQ(got[size_t(i)], want) << dtype_name(dtype) << " op " << int(op) << " element " << i;
      }
    }
  }
}

TEST(Collectives, Int64ExtremesSurviveASum) {
  // int64 sums are exact: the largest value on rank 0 and zeros elsewhere comes back unchanged.
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  Tensor t = from_vector<int64_t>({R() == 0 ? big : 0, R() == 0 ? small : 0}, {2});
  dist::all_reduce(t);
  EXPECT_EQ(t.data<int64_t>()[0], big);
  EXPECT_EQ(t.data<int64_t>()[1], small);
}

TEST(Collectives, NanAndInfinityPropagate) {
  Tensor t = from_vector(std::vector<float>{R() == 0 ? NAN : 1.0f, R() == W() - 1 ? INFINITY : 2.0f}, {2});
  dist::all_reduce(t);
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  EXPECT_TRUE(std::isinf(t.data<float>()[1]));
}

TEST(Collectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < W(); ++root) {
    Tensor t = full({4}, double(10 * R() + 1), DType::Float64);
    dist::broadcast(t, root);
    EXPECT_TRUE(testing::all_close(t, full({4}, double(10 * root + 1), DType::Float64), 0, 0)) << "root " << root;
  }
}

TEST(Collectives, AllGatherInRankOrder) {
  Tensor t = full({2, 3}, double(R()), DType::Int64);
  const std::vector<Tensor> all = dist::all_gather(t);
  ASSERT_EQ(int(all.size()), W());
  for (int r = 0; r < W(); ++r) {
    EXPECT_EQ(all[size_t(r)].shape(), (Shape{2, 3}));
    EXPECT_TRUE(testing::all_close(all[size_t(r)], full({2, 3}, double(r), DType::Int64), 0, 0)) << r;
  }
}

TEST(Collectives, EmptyTensorsAndBarrier) {
  Tensor empty_t = zeros({0, 3});
  dist::all_reduce(empty_t);
  EXPECT_EQ(empty_t.numel(), 0);
  EXPECT_EQ(dist::all_gather(empty_t).size(), size_t(W()));
  dist::barrier();
}

TEST(Collectives, MismatchedShapesAreAnErrorOnEveryRank) {
  if (W() == 1) GTEST_SKIP() << "one rank: nothing to mismatch";
  Tensor t = zeros({R() + 1});
  testing::expect_error([&] { dist::all_reduce(t); }, {"rank 1 passed a float32 (2)", "rank 0 a float32 (1)"});
  Tensor u = zeros({2}, DType(R() == 0 ? DType::Float32 : DType::Float64));
  testing::expect_error([&] { dist::broadcast(u, 0); }, {"every rank must pass the same shape and dtype"});
  dist::barrier();  // still in step afterwards
}

TEST(Collectives, BadArgumentsAreErrors) {
  testing::expect_error([] { dist::all_reduce(zeros({3, 4}).t()); }, {"not contiguous"});
  testing::expect_error([] { dist::all_reduce(zeros({3}, DType::Int32)); }, {"int32", "valid dtypes"});
  testing::expect_error([] { dist::all_reduce(zeros({3}, DType::Int64), dist::ReduceOp::Mean); }, {"mean of an integer"});
  testing::expect_error([] { dist::broadcast(zeros({3}), W()); }, {"is not a rank"});
  testing::expect_error([] { dist::all_reduce(Tensor()); }, {"undefined"});
}

// ---- data-parallel training

std::shared_ptr<nn::Sequential> mlp(uint64_t seed, int64_t hidden = 32) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, hidden), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(hidden, 4)});
}

std::shared_ptr<nn::Sequential> cnn(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 4, 3), std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 4 * 4, 4)});
}

constexpr int64_t kPerRank = 6;

// Step s's global batch (W * kPerRank examples); rank r's slice is rows [r * kPerRank, ...).
Tensor global_inputs(const Shape& example, int s) {
  Shape shape = example;
  shape.insert(shape.begin(), W() * kPerRank);
  return testing::random_tensor(shape, -1, 1, uint64_t(1000 + s)).to(DType::Float32);
}
Tensor global_targets(int s) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < W() * kPerRank; ++i) t.push_back((i * 7 + s) % 4);
  return from_vector(t, {W() * kPerRank});
}
Tensor my_slice(const Tensor& global) { return global.narrow(0, R() * kPerRank, kPerRank).contiguous(); }

void expect_same_parameters(nn::Module& a, nn::Module& b, double rtol, const std::string& what) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_TRUE(testing::all_close(pa[k].second, pb[k].second, rtol, rtol * 0.1)) << what << ": " << pa[k].first;
  }
}

// Every rank holds the same values of `t` (bit for bit).
void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  const std::vector<Tensor> all = dist::all_gather(t.contiguous());
  for (int r = 1; r < W(); ++r) EXPECT_TRUE(testing::all_close(all[size_t(r)], all[0], 0, 0)) << what << " rank " << r;
}

enum class Opt { Sgd, Adam };
std::unique_ptr<optim::Optimizer> make_optimizer(Opt kind, nn::Module& m) {
  if (kind == Opt::Sgd) return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  return std::make_unique<optim::Adam>(m.parameters(), optim::AdamOptions{.lr = 1e-2});
}

// 20 steps of data-parallel training against one process on the concatenated batches. Each rank
// starts from its own random weights: the wrapper's broadcast must make them rank 0's.
void train_and_compare(Opt kind, const std::string& what, dist::DDPOptions options = {}) {
  auto model = mlp(uint64_t(7 + R()));
  auto reference = mlp(7);
  dist::DistributedDataParallel ddp(*model, options);
  auto opt = make_optimizer(kind, *model);
  auto ref_opt = make_optimizer(kind, *reference);
  for (int s = 0; s < 20; ++s) {
    const Tensor x = global_inputs({12}, s), y = global_targets(s);
    opt->zero_grad();
    cross_entropy(ddp(my_slice(x)), my_slice(y)).backward();
    opt->step();
    ref_opt->zero_grad();
    cross_entropy((*reference)(x), y).backward();
    ref_opt->step();
  }
  expect_same_parameters(*model, *reference, 2e-5, what);
  for (const Tensor& p : model->parameters()) expect_same_on_every_rank(p, what);
}

TEST(DistributedDataParallel, SgdMatchesOneProcessOnTheConcatenatedBatch) {
  train_and_compare(Opt::Sgd, "SGD momentum");
}

TEST(DistributedDataParallel, AdamMatchesOneProcessOnTheConcatenatedBatch) {
  train_and_compare(Opt::Adam, "Adam");
}

TEST(DistributedDataParallel, OneBucketPerParameterGivesTheSameResult) {
  train_and_compare(Opt::Sgd, "tiny buckets", {.bucket_cap_mb = 1e-6});
  auto model = mlp(1);
  dist::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 1e-6});
  cross_entropy(ddp(my_slice(global_inputs({12}, 0))), my_slice(global_targets(0))).backward();
  EXPECT_EQ(ddp.last_stats().buckets, 4);  // two weights, two biases
  EXPECT_GT(ddp.last_stats().bytes, 0);
}

// BatchNorm in eval mode normalizes with the running statistics: the step is the global batch's.
TEST(DistributedDataParallel, BatchNormWithEvalStatisticsMatchesTheConcatenatedBatch) {
  auto model = cnn(uint64_t(20 + R()));
  auto reference = cnn(20);
  model->eval();
  reference->eval();
  dist::DistributedDataParallel ddp(*model);
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int s = 0; s < 20; ++s) {
    const Tensor x = global_inputs({1, 6, 6}, s), y = global_targets(s);
    opt.zero_grad();
    cross_entropy(ddp(my_slice(x)), my_slice(y)).backward();
    opt.step();
    ref_opt.zero_grad();
    cross_entropy((*reference)(x), y).backward();
    ref_opt.step();
  }
  expect_same_parameters(*model, *reference, 2e-5, "batch norm, eval statistics");
}

// In training mode each rank normalizes with its own slice's statistics (per-rank statistics, as
// PyTorch's DDP without SyncBatchNorm): the step is the mean over the slices of each slice's
// gradient, which one process computes as the mean of the W slices' losses. The running
// statistics are rank 0's everywhere (broadcast before each forward).
TEST(DistributedDataParallel, BatchNormWithPerRankStatistics) {
  auto model = cnn(uint64_t(30 + R()));
  auto reference = cnn(30);
  dist::DistributedDataParallel ddp(*model);
  // (SGD, not Adam: the convolution's bias, followed by batch norm, has an exact gradient of zero,
  // and Adam would magnify its rounding noise into steps of full size.)
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int s = 0; s < 20; ++s) {
    const Tensor x = global_inputs({1, 6, 6}, s), y = global_targets(s);
    opt.zero_grad();
    cross_entropy(ddp(my_slice(x)), my_slice(y)).backward();
    opt.step();
    ref_opt.zero_grad();
    Tensor loss;
    for (int r = 0; r < W(); ++r) {
      const Tensor l = cross_entropy((*reference)(x.narrow(0, r * kPerRank, kPerRank)), y.narrow(0, r * kPerRank, kPerRank));
      loss = loss.defined() ? loss + l : l;
    }
    (loss * (1.0 / W())).backward();
    ref_opt.step();
  }
  expect_same_parameters(*model, *reference, 2e-5, "batch norm, per-rank statistics");
  ddp.broadcast_buffers();
  for (const Tensor& b : model->buffers()) expect_same_on_every_rank(b, "running statistics");
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenAllReducesTheSum) {
  auto model = mlp(uint64_t(40 + R()));
  auto reference = mlp(40);
  dist::DistributedDataParallel ddp(*model);
  const Tensor x0 = global_inputs({12}, 0), y0 = global_targets(0), x1 = global_inputs({12}, 1), y1 = global_targets(1);
  {
    auto guard = ddp.no_sync();
    cross_entropy(ddp(my_slice(x0)), my_slice(y0)).backward();
    EXPECT_EQ(ddp.last_stats().buckets, 0);
  }
  if (W() > 1) {  // local gradients: they differ between ranks
    const std::vector<Tensor> all = dist::all_gather(model->parameters()[0].grad());
    EXPECT_FALSE(testing::all_close(all[0], all[1], 1e-6, 0));
  }
  cross_entropy(ddp(my_slice(x1)), my_slice(y1)).backward();
  cross_entropy((*reference)(x0), y0).backward();
  cross_entropy((*reference)(x1), y1).backward();
  const auto got = model->named_parameters(), want = reference->named_parameters();
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(testing::all_close(got[k].second.grad(), want[k].second.grad(), 1e-5, 1e-7)) << got[k].first;
  }
}

// A parameter used on rank 0 only gets the mean with zeros from the others; one no rank uses
// keeps no gradient, and the buckets behind it still complete.
class Branchy : public nn::Module {
 public:
  explicit Branchy(bool use_b) : use_b_(use_b) {
    register_module("a", a);
    register_module("b", b);
    register_module("c", c);
  }
  Tensor forward(const Tensor& x) override { return use_b_ ? (*a)(x) + (*b)(x) : (*a)(x); }
  std::string type_name() const override { return "Branchy"; }
  std::shared_ptr<nn::Linear> a = std::make_shared<nn::Linear>(12, 4);
  std::shared_ptr<nn::Linear> b = std::make_shared<nn::Linear>(12, 4);
  std::shared_ptr<nn::Linear> c = std::make_shared<nn::Linear>(12, 4);

 private:
  bool use_b_;
};

TEST(DistributedDataParallel, UnusedParameters) {
  manual_seed(50);
  Branchy model(R() == 0);
  dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = 1e-6});
  const Tensor x = my_slice(global_inputs({12}, 0)), y = my_slice(global_targets(0));
  cross_entropy(ddp(x), y).backward();
  // b's gradient: rank 0's own, divided by W.
  Tensor b_grad = R() == 0 ? model.b->parameters()[0].grad().clone() : zeros({4, 12});
  dist::broadcast(b_grad, 0);
  manual_seed(50);
  Branchy alone(true);
  alone.load_state_dict(model.state_dict());
  const Tensor x0 = global_inputs({12}, 0).narrow(0, 0, kPerRank), y0 = global_targets(0).narrow(0, 0, kPerRank);
  cross_entropy(alone(x0), y0).backward();
  EXPECT_TRUE(testing::all_close(model.b->parameters()[0].grad(), alone.b->parameters()[0].grad() * (1.0 / W()), 1e-5, 1e-7));
  EXPECT_FALSE(model.c->parameters()[0].grad().defined()) << "no rank used c";
  EXPECT_FALSE(model.c->parameters()[1].grad().defined());
  for (const Tensor& p : model.a->parameters()) expect_same_on_every_rank(p.grad(), "a's gradient");
}

TEST(DistributedDataParallel, MismatchedParametersAreAnErrorAtWrapTime) {
  if (W() == 1) GTEST_SKIP() << "one rank: nothing to mismatch";
  auto model = mlp(1, R() == 1 ? 33 : 32);
  testing::expect_error([&] { dist::DistributedDataParallel ddp(*model); },
                        {"rank 1's module differs from rank 0's at parameter 0", "(32, 12)", "(33, 12)"});
}

// ---- the compiled step

CompileOptions interpreted() {
  CompileOptions o;
  o.backend = "interpreter";
  return o;
}

void compiled_and_compare(Opt kind, StepOptions step, dist::DDPOptions options, const std::string& what) {
  auto model = mlp(uint64_t(60 + R()));
  auto reference = mlp(60);
  dist::DistributedDataParallel ddp(*model, options);
  auto opt = make_optimizer(kind, *model);
  auto ref_opt = make_optimizer(kind, *reference);
  dist::DistributedStep train = ddp.compile_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; }, *opt,
      step, interpreted());
  for (int s = 0; s < 20; ++s) {
    const Tensor x = global_inputs({12}, s), y = global_targets(s);
    train({my_slice(x), my_slice(y)});
    cross_entropy((*reference)(x), y).backward();
    if (step.clip_grad_norm > 0) optim::clip_grad_norm_(reference->parameters(), step.clip_grad_norm);
    ref_opt->step();
    ref_opt->zero_grad();
  }
  expect_same_parameters(*model, *reference, 2e-5, what);
  for (const Tensor& p : model->parameters()) expect_same_on_every_rank(p, what);
  if (W() > 1) {
    const std::string plan = train.compiled().report().plan;
    EXPECT_NE(plan.find("all_reduce_start"), std::string::npos) << plan;
    EXPECT_NE(plan.find("all_reduce_wait"), std::string::npos) << plan;
    EXPECT_GT(ddp.last_stats().buckets, 0);
  }
}

TEST(DistributedStep, SgdMatchesOneProcess) {
  compiled_and_compare(Opt::Sgd, {}, {}, "compiled SGD");
}

TEST(DistributedStep, AdamWithClippingAndSmallBucketsMatchesOneProcess) {
  compiled_and_compare(Opt::Adam, {.clip_grad_norm = 0.5}, {.bucket_cap_mb = 1e-6}, "compiled Adam, clipped");
}

// The plan starts a bucket's all-reduce as soon as its gradients exist: with a bucket per
// parameter, the last layer's all-reduce starts before the first layer's weight gradient.
TEST(DistributedStep, BucketsStartWhileTheBackwardRuns) {
  if (W() == 1) GTEST_SKIP() << "one rank: no all-reduce in the plan";
  auto model = mlp(70);
  dist::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 1e-6});
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  dist::DistributedStep train = ddp.compile_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; }, opt,
      {}, interpreted());
  train({my_slice(global_inputs({12}, 0)), my_slice(global_targets(0))});
  const std::string plan = train.compiled().report().plan;
  const size_t first_start = plan.find("all_reduce_start");
  const size_t first_wait = plan.find("all_reduce_wait");
  ASSERT_NE(first_start, std::string::npos) << plan;
  // Some step computing a gradient runs between the first start and the first wait.
  const std::string between = plan.substr(first_start, first_wait - first_start);
  EXPECT_NE(between.find("matmul"), std::string::npos) << plan;
  EXPECT_EQ(ddp.last_stats().buckets, 4);
}

// Batch norm in training mode, compiled: per-rank statistics as eagerly (the mean over the slices
// of each slice's gradient), rank 0's running statistics broadcast before each call.
TEST(DistributedStep, BatchNormWithPerRankStatistics) {
  auto model = cnn(uint64_t(85 + R()));
  auto reference = cnn(85);
  dist::DistributedDataParallel ddp(*model);
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  dist::DistributedStep train = ddp.compile_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; }, opt,
      {}, interpreted());
  for (int s = 0; s < 20; ++s) {
    const Tensor x = global_inputs({1, 6, 6}, s), y = global_targets(s);
    train({my_slice(x), my_slice(y)});
    ref_opt.zero_grad();
    Tensor loss;
    for (int r = 0; r < W(); ++r) {
      const Tensor l = cross_entropy((*reference)(x.narrow(0, r * kPerRank, kPerRank)), y.narrow(0, r * kPerRank, kPerRank));
      loss = loss.defined() ? loss + l : l;
    }
    (loss * (1.0 / W())).backward();
    ref_opt.step();
  }
  expect_same_parameters(*model, *reference, 2e-5, "compiled, batch norm, per-rank statistics");
  ddp.broadcast_buffers();
  for (const Tensor& b : model->buffers()) expect_same_on_every_rank(b, "running statistics");
}

// A step that differs between ranks (here rank 0's loss reaches b, the others' do not) would
// all-reduce buffers of different sizes: the first bucket compares the layouts first.
TEST(DistributedStep, RanksThatCompiledDifferentStepsAreAnError) {
  if (W() == 1) GTEST_SKIP() << "one rank: nothing to mismatch";
  manual_seed(75);
  Branchy model(R() == 0);
  dist::DistributedDataParallel ddp(model);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  dist::DistributedStep train = ddp.compile_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(model(in[0]), in[1])}; }, opt, {},
      interpreted());
  testing::expect_error([&] { train({my_slice(global_inputs({12}, 0)), my_slice(global_targets(0))}); },
                        {"rank 1's step all-reduces other gradients than rank 0's"});
  dist::barrier();
}

TEST(DistributedStep, AccumulatingCallsCommunicateNothing) {
  auto model = mlp(uint64_t(80 + R()));
  auto reference = mlp(80);
  dist::DistributedDataParallel ddp(*model);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.1});
  auto loss_of = [](nn::Module& m, const Tensor& x, const Tensor& y) { return cross_entropy(m.forward(x), y) * 0.5; };
  dist::DistributedStep train = ddp.compile_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(*model, in[0], in[1])}; }, opt,
      {.accumulation_steps = 2}, interpreted());
  for (int s = 0; s < 6; ++s) {
    const Tensor x = global_inputs({12}, s), y = global_targets(s);
    train({my_slice(x), my_slice(y)});
    EXPECT_EQ(ddp.last_stats().buckets > 0, W() > 1 && s % 2 == 1) << "call " << s;
    loss_of(*reference, x, y).backward();
    if (s % 2 == 1) {
      ref_opt.step();
      ref_opt.zero_grad();
    }
  }
  expect_same_parameters(*model, *reference, 2e-5, "accumulated over 2 calls");
}

// ---- the sampler and checkpoints

TEST(DistributedSampler, ShardsAreDisjointCoverTheEpochAndReshuffle) {
  const int64_t n = 10 * W() + (W() > 1 ? 1 : 0);  // not a multiple of W: wrapped around
  auto dataset = std::make_shared<data::TensorDataset>(arange(0, double(n)).to(DType::Float32).reshape({n, 1}),
                                                       arange(0, double(n)).to(DType::Int64));
  data::DataLoader loader(dataset, {.batch_size = 4, .shuffle = true, .seed = 9, .num_shards = W(), .shard = R()});
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 2; ++e) {
    loader.begin();
    const std::vector<int64_t> mine = loader.order();
    const std::vector<Tensor> all = dist::all_gather(from_vector(mine, {int64_t(mine.size())}));
    std::vector<int64_t> seen;
    for (const Tensor& t : all)
      for (double v : t.to_vector()) seen.push_back(int64_t(v));
    EXPECT_EQ(int64_t(seen.size()), (n + W() - 1) / W() * W());
    std::set<int64_t> distinct(seen.begin(), seen.end());
    EXPECT_EQ(int64_t(distinct.size()), n) << "every example is in some shard";
    epochs.push_back(seen);
  }
  EXPECT_NE(epochs[0], epochs[1]) << "each epoch reshuffles";
}

TEST(DistributedCheckpoint, RankZeroWritesEveryRankReads) {
  Tensor pid = from_vector<int64_t>({int64_t(getpid())}, {1});
  dist::broadcast(pid, 0);  // every rank names the same file
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("smelt_ddp_checkpoint_" + std::to_string(pid.data<int64_t>()[0]) + ".safetensors"))
                               .string();
  auto model = mlp(90);
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  cross_entropy((*model)(my_slice(global_inputs({12}, 0))), my_slice(global_targets(0))).backward();
  opt.step();
  dist::save_checkpoint(path, *model, opt);
  auto loaded = mlp(91);
  optim::SGD loaded_opt(loaded->parameters(), {.lr = 0.1, .momentum = 0.9});
  io::load_checkpoint(path, *loaded, loaded_opt);
  if (R() == 0) expect_same_parameters(*model, *loaded, 0, "checkpoint");
  for (const Tensor& p : loaded->parameters()) expect_same_on_every_rank(p, "loaded checkpoint");
  dist::barrier();
  if (R() == 0) std::filesystem::remove(path);
}

}  // namespace
}  // namespace smelt

// One gtest run per rank; ranks other than 0 print only their failures.
namespace {
class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name(), r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  smelt::distributed::init({.timeout_seconds = 120});
  if (smelt::distributed::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(smelt::distributed::rank()));
  }
  return RUN_ALL_TESTS();
}
