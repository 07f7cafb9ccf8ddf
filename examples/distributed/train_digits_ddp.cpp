// Data-parallel training of the digits CNN (models::digits_cnn, the one `make demo` trains), on as
// many processes as mpirun starts: `make demo-dp` runs it on 2 and on 1 and prints both test
// accuracies, which should agree.
//
//   scripts/mpirun.sh 2 build/examples/train_digits_ddp [--eager] [--epochs N]
//
// Every rank reads the whole data set and trains on its shard of each epoch (DataLoader's
// num_shards/shard) with a per-rank batch of 64 / world size, so that a step sees the same 64
// images in all and the schedule matches the single-process run step for step. The gradients are
// averaged across ranks by DistributedDataParallel, inside the compiled step's plan by default
// (--eager: hooks during an eager backward). Rank 0 prints, evaluates and writes the checkpoint.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "smelt/distributed.h"
#include "smelt/smelt.h"

using namespace smelt;

namespace {

Tensor images(const Tensor& rows) { return rows.reshape({-1, 1, 8, 8}) / 16.0; }

double accuracy(nn::Module& model, const data::DatasetPtr& dataset) {
  NoGradGuard no_grad;
  model.eval();
  data::DataLoader loader(dataset, {.batch_size = 256});
  int64_t correct = 0;
  for (const data::Batch& b : loader) {
    correct += int64_t(sum(cast(eq(argmax(model(images(b.inputs)), 1), b.targets), DType::Int64)).item());
  }
  model.train();
  return double(correct) / double(dataset->size());
}

}  // namespace

int main(int argc, char** argv) {
  bool eager = false;
  int epochs = 20;
  std::string out = "build/demo-dp";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--eager")) eager = true;
    else if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--eager] [--epochs N] [--out DIR]\n", argv[0]);
      return 2;
    }
  }
  distributed::init();
  const int rank = distributed::rank(), world = distributed::world_size();
  const int64_t global_batch = 64;
  if (global_batch % world != 0) {
    if (rank == 0) std::fprintf(stderr, "the batch of %lld does not split over %d processes\n", (long long)global_batch, world);
    return 2;
  }

  manual_seed(0);
  auto digits = data::load_digits(data::default_data_dir() + "/digits.csv.gz");
  auto [train, test] = data::train_test_split(digits, 0.8, 0);
  manual_seed(uint64_t(rank));  // each rank starts elsewhere: the wrapper copies rank 0's weights
  auto model = models::digits_cnn();
  distributed::DistributedDataParallel ddp(*model);
  optim::Adam adam(model->parameters(), {.lr = 3e-3});
  optim::CosineAnnealingLR schedule(adam, epochs);
  data::DataLoader loader(train, {.batch_size = global_batch / world, .shuffle = true, .seed = 1,
                                  .num_shards = world, .shard = rank});
  auto loss_fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cross_entropy((*model)(images(in[0])), in[1])};
  };
  std::optional<distributed::DistributedStep> compiled;
  if (!eager) compiled.emplace(ddp.compile_step(loss_fn, adam));
  if (rank == 0) {
    std::printf("digits CNN on %d process%s (%s step), %lld images per process per step, %d epochs\n", world,
                world == 1 ? "" : "es", eager ? "eager" : "compiled", (long long)(global_batch / world), epochs);
  }
  double comm = 0, blocked = 0;
  int64_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss_sum = 0;
    int64_t batches = 0;
    for (const data::Batch& b : loader) {
      Tensor loss;
      if (eager) {
        adam.zero_grad();
        loss = loss_fn({b.inputs, b.targets})[0];
        loss.backward();
        adam.step();
      } else {
        loss = (*compiled)({b.inputs, b.targets})[0];
      }
      loss_sum += loss.item();
      ++batches;
      comm += ddp.last_stats().comm_seconds;
      blocked += ddp.last_stats().blocked_seconds;
      ++steps;
    }
    schedule.step();
    Tensor mean_loss = from_vector<double>({loss_sum / double(batches)}, {1});
    distributed::all_reduce(mean_loss, distributed::ReduceOp::Mean);
    if (rank == 0 && (epoch % 5 == 0 || epoch == epochs)) {
      std::printf("epoch %2d: train loss %.4f, test accuracy %.1f%%\n", epoch, mean_loss.item(),
                  100.0 * accuracy(*model, test));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank == 0) std::filesystem::create_directories(out);
  distributed::save_checkpoint(out + "/digits_cnn_dp.safetensors", *model, adam);
  if (rank == 0) {
    std::printf("final test accuracy %.1f%% on %d process%s; %.2f s, %.2f ms per step", 100.0 * accuracy(*model, test),
                world, world == 1 ? "" : "es", seconds, 1e3 * seconds / double(steps));
    if (world > 1 && comm > 0) {
      std::printf("; all-reduce %.3f ms per step, %.0f%% of it hidden behind the backward", 1e3 * comm / double(steps),
                  100.0 * std::max(0.0, 1.0 - blocked / comm));
    }
    std::printf("\ncheckpoint (rank 0): %s/digits_cnn_dp.safetensors\n", out.c_str());
  }
  return 0;
}
