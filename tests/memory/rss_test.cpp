// 10,000 training steps of the demo model keep the resident set flat: autograd nodes, saved
// tensors, gradients and optimizer temporaries are all freed (or reused) every step.
#include <unistd.h>

#include <fstream>

#include "support/check.h"

namespace smelt {
namespace {

// Resident set size in bytes, from /proc/self/statm (pages).
double rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE));
}

// A leak grows with the step count; allocator noise (malloc arenas of worker threads, transient
// peaks) does not. So the test compares the highest RSS seen in an early window of steps with the
// highest RSS seen in the last window: a leak of even a few bytes per node would add megabytes
// over the 8,000 steps between them.
TEST(Memory, TrainingStepsKeepRssFlat) {
  constexpr int kSteps = 10000, kWindow = 1000, kEarlyStart = 1000;
  manual_seed(0);
  auto model = models::digits_cnn();
  optim::Adam adam(model->parameters(), {.lr = 1e-3});
  Tensor x = rand({64, 1, 8, 8});
  Tensor y = randint(0, 10, {64});
  double early = 0, late = 0;
  for (int step = 1; step <= kSteps; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy((*model)(x), y);
    loss.backward();
    adam.step();
    if (step % 50 != 0) continue;
    if (step > kEarlyStart && step <= kEarlyStart + kWindow) early = std::max(early, rss_bytes());
    if (step > kSteps - kWindow) late = std::max(late, rss_bytes());
  }
  EXPECT_GT(early, 0);
  EXPECT_LE(late, early * 1.05) << "RSS peaked at " << early / 1e6 << " MB in steps " << kEarlyStart
                                << ".." << kEarlyStart + kWindow << " but at " << late / 1e6
                                << " MB in the last " << kWindow << " of " << kSteps << " steps";
}

}  // namespace
}  // namespace smelt
