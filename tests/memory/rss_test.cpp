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

TEST(Memory, TrainingStepsKeepRssFlat) {
  constexpr int kSteps = 10000, kWarmup = 500;
  manual_seed(0);
  auto model = models::digits_cnn();
  optim::Adam adam(model->parameters(), {.lr = 1e-3});
  Tensor x = rand({64, 1, 8, 8});
  Tensor y = randint(0, 10, {64});
  double warm = 0, peak = 0;
  for (int step = 1; step <= kSteps; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy((*model)(x), y);
    loss.backward();
    adam.step();
    if (step == kWarmup) warm = rss_bytes();
    if (step > kWarmup && step % 100 == 0) peak = std::max(peak, rss_bytes());
  }
  double end = rss_bytes();
  EXPECT_GT(warm, 0);
  EXPECT_LE(end, warm * 1.05) << "RSS grew from " << warm / 1e6 << " MB after " << kWarmup
                              << " steps to " << end / 1e6 << " MB after " << kSteps;
  EXPECT_LE(peak, warm * 1.05) << "RSS peaked at " << peak / 1e6 << " MB (warm: " << warm / 1e6 << " MB)";
}

}  // namespace
}  // namespace smelt
