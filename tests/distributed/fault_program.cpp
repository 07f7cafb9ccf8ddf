// A data-parallel training job that goes wrong on purpose, for tests/distributed/faults.sh:
//   fault_program throw      rank 1 throws at step 3 (the exception escapes main)
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
    distributed::init({.world_size = 2});
    return 0;
  }
  distributed::init();
  const int rank = distributed::rank();
  manual_seed(1);
  const int64_t hidden = mode == "mismatch" && rank == 1 ? 17 : 16;
  nn::Sequential model(std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(8, hidden),
                                                                std::make_shared<nn::ReLU>(),
                                                                std::make_shared<nn::Linear>(hidden, 3)});
  distributed::DistributedDataParallel ddp(model);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  for (int step = 0; step < 10; ++step) {
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
