// Data-parallel training steps on MPI (`make bench-dp`, bench/README.md "Data-parallel training"):
// run under scripts/mpirun.sh with 1 and with 2 ranks (one thread each). Per workload and step
// kind (eager, compiled) rank 0 prints the step time, the communication per step (issue to
// completion, summed over buckets), the time the training thread waited for it, the part hidden
// behind the backward, and the bytes all-reduced; then the all-reduce's own rate at a few sizes,
// from which bench/README.md models the scaling to N machines.
//
// Each rank runs the bench's whole batch (weak scaling: N ranks train on N times the data per
// step), so the step time on N ranks against 1 rank is the cost of data parallelism.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "smelt/distributed.h"
#include "smelt/smelt.h"
#include "suite/models.h"

using namespace smelt;
namespace dist = smelt::distributed;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> model;
  std::function<std::shared_ptr<optim::Optimizer>(nn::Module&)> optimizer;
  std::function<Tensor(nn::Module&, const std::vector<Tensor>&)> loss;
  std::vector<Tensor> inputs;
};

void run_case(const Case& c, bool compiled, int steps) {
  manual_seed(1);
  auto model = c.model();
  auto opt = c.optimizer(*model);
  dist::DistributedDataParallel ddp(*model);
  nn::Module* m = model.get();
  auto loss = c.loss;
  std::optional<dist::DistributedStep> step;
  if (compiled) {
    CompileOptions options;
    options.backend = "cpp";
    step.emplace(ddp.compile_step([m, loss](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss(*m, in)}; },
                                  *opt, {}, options));
  }
  auto one = [&] {
    if (compiled) {
      (*step)(c.inputs);
      return;
    }
    opt->zero_grad();
    ddp.prepare_forward();
    loss(*m, c.inputs).backward();
    opt->step();
  };
  for (int i = 0; i < 3; ++i) one();  // compiles, warms up
  std::vector<double> times, comm, blocked;
  int64_t bytes = 0;
  int buckets = 0;
  for (int i = 0; i < steps; ++i) {
    dist::barrier();  // every rank starts the step together
    const double t0 = now();
    one();
    times.push_back(now() - t0);
    comm.push_back(ddp.last_stats().comm_seconds);
    blocked.push_back(ddp.last_stats().blocked_seconds);
    bytes = ddp.last_stats().bytes;
    buckets = ddp.last_stats().buckets;
  }
  // The slowest rank's median sets the pace.
  Tensor worst = from_vector<double>({median(times), median(comm), median(blocked)}, {3});
  dist::all_reduce(worst, dist::ReduceOp::Max);
  const std::vector<double> w = worst.to_vector();
  if (dist::rank() == 0) {
    const double hidden = w[1] > 0 ? std::max(0.0, 1.0 - w[2] / w[1]) : 0.0;
    std::printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.0f%% | %.1f MiB in %d buckets |\n", c.name.c_str(),
                compiled ? "compiled" : "eager", dist::world_size(), 1e3 * w[0], 1e3 * w[1], 1e3 * w[2],
                100.0 * hidden, double(bytes) / (1 << 20), buckets);
    std::fflush(stdout);
  }
}

void all_reduce_rate() {
  if (dist::world_size() == 1) return;
  const int n = dist::world_size();
  if (dist::rank() == 0) {
    std::printf("\nall_reduce (float32, %d ranks): size, median time, algorithm rate (bytes / time), bus rate "
                "(2(N-1)/N bytes / time)\n",
                n);
  }
  for (int64_t mib : {1, 4, 16, 64}) {
    Tensor t = ones({mib * (1 << 20) / 4});
    std::vector<double> times;
    for (int i = 0; i < 7; ++i) {
      dist::barrier();
      const double t0 = now();
      dist::all_reduce(t);
      times.push_back(now() - t0);
    }
    Tensor worst = from_vector<double>({median(times)}, {1});
    dist::all_reduce(worst, dist::ReduceOp::Max);
    const double s = worst.item(), b = double(mib) * (1 << 20);
    if (dist::rank() == 0) {
      std::printf("  %3lld MiB: %8.2f ms, %6.2f GB/s, bus %6.2f GB/s\n", (long long)mib, 1e3 * s, b / s / 1e9,
                  2.0 * (n - 1) / n * b / s / 1e9);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) steps = 5;
  }
  dist::init();
  const std::vector<Case> cases = {
      {"MLP 784-1024-1024-10 train step b256 (Adam)", [] { return bench::mlp(); },
       [](nn::Module& m) { return std::make_shared<optim::Adam>(m.parameters(), optim::AdamOptions{.lr = 1e-3}); },
       [](nn::Module& m, const std::vector<Tensor>& in) { return cross_entropy(m(in[0]), in[1]); },
       {randn({256, 784}), randint(0, 10, {256})}},
      {"transformer block d256 h4 s128 b8 fwd+bwd+AdamW", [] { return std::make_shared<bench::EncoderBlock>(256, 4); },
       [](nn::Module& m) { return std::make_shared<optim::AdamW>(m.parameters(), optim::AdamOptions{.lr = 1e-3}); },
       [](nn::Module& m, const std::vector<Tensor>& in) { return mean(pow(m(in[0]), 2.0)); },
       {randn({8, 128, 256})}},
  };
  if (dist::rank() == 0) {
    std::printf("| workload | step | ranks | step ms | all-reduce ms | waited ms | hidden | per step |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  }
  for (const Case& c : cases) {
    for (bool compiled : {false, true}) run_case(c, compiled, steps);
  }
  all_reduce_rate();
  return 0;
}
