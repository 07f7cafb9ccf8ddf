// A data-parallel training job that goes wrong on purpose, for tests/distributed/faults.sh:
//   fault_program throw      rank 1 throws at step 3 (the exception escapes main)
//   fault_program backward   rank 1 throws in the middle of step 3's backward, after its first
//                            bucket's all-reduce started (a gradient hook throws)
//   fault_program hang       rank 1 stops calling collectives at step 3 (sleeps)
//   fault_program mismatch   rank 1 builds a wider module than the others
//   fault_program world2     asks for 2 processes (run it without mpirun)
// Each run must end, on every rank, with an error that names what happened.
#include <chrono>
#include <cstring>
#include <thread>

#include "smelt/distributed.h"
#include "smelt/smelt.h"

using namespace smelt;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "world2") {
    try {
      distributed::init({.world_size = 2});
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  distributed::init();
  const int rank = distributed::rank();
  manual_seed(1);
  const int64_t hidden = mode == "mismatch" && rank == 1 ? 17 : 16;
  nn::Sequential model(std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(8, hidden),
                                                                std::make_shared<nn::ReLU>(),
                                                                std::make_shared<nn::Linear>(hidden, 3)});
  // A bucket per parameter: the last layer's all-reduce starts before the first layer's gradient.
  distributed::DistributedDataParallel ddp(model, {.bucket_cap_mb = 1e-6});
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  int step = 0;
  if (mode == "backward" && rank == 1) {
    model.parameters()[0].register_hook([&step](const Tensor& g) -> Tensor {
      if (step == 3) throw Error("boom in the backward of step 3");
      return g;
    });
  }
  for (; step < 10; ++step) {
    if (step == 3 && rank == 1) {
      if (mode == "throw") throw Error("boom at step 3");
      if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    opt.zero_grad();
    const Tensor x = randn({4, 8});
    cross_entropy(ddp(x), from_vector<int64_t>({0, 1, 2, 0}, {4})).backward();
    opt.step();
  }
  std::printf("rank %d finished\n", rank);
  return 0;
}
