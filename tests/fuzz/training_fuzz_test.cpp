// The compiled-training fuzzer in CI (fuzz/training_fuzzer.h): random small float64 models trained
// with compile_step against eager training, and a check that the fuzzer sees a wrong update.
#include "fuzz/training_fuzzer.h"
#include "support/check.h"

namespace smelt {
namespace {

TEST(TrainingFuzz, RandomModelsTrainAsEager) {
  int updates = 0, in_place = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const fuzz::TrainingCaseResult r = fuzz::check_training_case(seed);
    updates += r.updates;
    in_place += r.in_place;
    EXPECT_TRUE(r.passed) << "seed " << seed << ": " << r.message << "\n  " << r.description;
  }
  EXPECT_GT(updates, 150);   // the cases do update (accumulation skips some calls)
  EXPECT_GT(in_place, 200);  // and the plans write parameters and state in place
}

}  // namespace
}  // namespace smelt
