// The eager autograd fuzzer in CI: a few hundred random programs with in-place ops and views,
// and checks that its out-of-place executor means what the in-place program means.
#include "fuzz/autograd_fuzzer.h"
#include "fuzz/autograd_program.h"
#include "support/check.h"

namespace smelt {
namespace {

using testing::all_close;

TEST(AutogradFuzz, RandomProgramsAgree) {
  int in_place_ops = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    fuzz::AutogradCaseResult r = fuzz::check_autograd_program(seed);
    in_place_ops += r.in_place_ops;
    EXPECT_TRUE(r.passed) << "seed " << seed << ": " << r.message << "\n" << r.program;
  }
  EXPECT_GT(in_place_ops, 400);  // the programs do exercise in-place ops
}

// Runs both executors on one hand-written program; returns slot `out` from each.
std::pair<Tensor, Tensor> run_both(const std::vector<fuzz::Step>& program, int out) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  fuzz::InPlaceRun a{{x}};
  fuzz::FunctionalRun b({x});
  for (const fuzz::Step& s : program) {
    a.run(s);
    b.run(s);
  }
  return {a.slots[size_t(out)], b.read(out)};
}

TEST(AutogradFuzz, FunctionalRunRebuildsTheRootOfAWrittenView) {
  using fuzz::StepKind;
  fuzz::Step copy{StepKind::Scale, 0, -1, {}, 1.0};              // %1 = x * 1
  fuzz::Step cols{StepKind::Slice, 1, -1, {1, 0, 3, 2}};         // %2 = %1[:, 0:3:2]
  fuzz::Step rows{StepKind::Permute, 2, -1, {1, 0}};             // %3 = %2.t()
  fuzz::Step write{StepKind::MulC, 3, -1, {}, 10.0};             // %3.mul_(10)
  auto [a, b] = run_both({copy, cols, rows, write}, 1);
  Tensor want = from_vector(std::vector<double>{10, 2, 30, 40, 5, 60}, {2, 3});
  EXPECT_TRUE(all_close(a, want, 0, 0));
  EXPECT_TRUE(all_close(b, want, 0, 0));
}

}  // namespace
}  // namespace smelt
