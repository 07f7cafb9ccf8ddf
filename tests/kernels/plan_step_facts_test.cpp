// kernels/conv.h PlanStepScope: a fact a plan's step records about the memory it wrote (every
// value moderate) is trusted by the next step only, inside a plan run only, for exactly that
// memory; a new scope (a plan run inside another plan's step) forgets it. A stale fact would let a
// conv skip the scan of an input that holds NaN or infinities (oneDNN's clamp would then hide them).
#include <gtest/gtest.h>

#include "kernels/conv.h"

namespace smelt::kernels {
namespace {

TEST(PlanStepFacts, TrustedByTheNextStepOnly) {
  float a[8] = {}, b[8] = {};
  PlanStepScope scope;
  PlanStepScope::next();  // step 1 writes a
  plan_step_record_moderate(a, 8);
  EXPECT_FALSE(plan_step_moderate_known(a, 8));  // the step that wrote it: not yet
  PlanStepScope::next();                          // step 2
  EXPECT_TRUE(plan_step_moderate_known(a, 8));
  EXPECT_FALSE(plan_step_moderate_known(a, 7));  // other memory
  EXPECT_FALSE(plan_step_moderate_known(a + 1, 7));
  EXPECT_FALSE(plan_step_moderate_known(b, 8));
  PlanStepScope::next();  // step 3: step 2 may have reused a's memory
  EXPECT_FALSE(plan_step_moderate_known(a, 8));
}

TEST(PlanStepFacts, NothingOutsideAPlanRun) {
  float a[4] = {};
  plan_step_record_moderate(a, 4);  // an eager call: its caller may write a at any time
  PlanStepScope::next();
  EXPECT_FALSE(plan_step_moderate_known(a, 4));
  {
    PlanStepScope scope;
    EXPECT_FALSE(plan_step_moderate_known(a, 4));
  }
}

TEST(PlanStepFacts, AScopeForgetsWhenItOpensAndCloses) {
  float a[4] = {};
  PlanStepScope outer;
  PlanStepScope::next();
  plan_step_record_moderate(a, 4);
  {
    PlanStepScope inner;  // a plan run by the outer plan's step
    PlanStepScope::next();
    EXPECT_FALSE(plan_step_moderate_known(a, 4));
    plan_step_record_moderate(a, 4);
  }
  PlanStepScope::next();  // the outer plan's next step: the inner run's fact is gone too
  EXPECT_FALSE(plan_step_moderate_known(a, 4));
}

}  // namespace
}  // namespace smelt::kernels
