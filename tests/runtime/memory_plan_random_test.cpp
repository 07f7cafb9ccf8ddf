// The memory planner on thousands of seeded random request sets and on training-step lifetimes:
// every plan is checked (no two live buffers overlap), lower bound <= arena <= naive, and the
// lower bound is recomputed here step by step. How close the arena comes to the lower bound is
// measured and printed, never asserted (greedy placement has no such guarantee).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>

#include "runtime/memory_plan.h"
#include "schedules.h"
#include "smelt/error.h"

namespace smelt::runtime {
namespace {

using testing::mlp_training_step;
using testing::random_intervals;
using testing::random_schedule;

int64_t rounded(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The lower bound the slow way: at every step, the live bytes minus what in-place pairs share.
int64_t brute_lower_bound(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  int64_t best = 0;
  for (int64_t t = 0; t < plan.num_steps; ++t) {
    int64_t live = 0;
    for (const BufferRequest& r : requests) {
      if (r.first_step <= t && t <= r.last_step) live += rounded(r.bytes);
    }
    for (const InplaceReuse& u : plan.inplace) {
      if (requests[u.buffer].first_step == t) {
        live -= std::min(rounded(requests[u.buffer].bytes), rounded(requests[u.reused].bytes));
      }
    }
    best = std::max(best, live);
  }
  return best;
}

// Every property that must hold, for the default plan and for each strategy alone.
// Returns the default plan.
MemoryPlan check_all(const std::vector<BufferRequest>& requests, const std::string& where) {
  SCOPED_TRACE(where);
  const MemoryPlan plan = plan_memory(requests, MemoryPlanOptions{});
  EXPECT_NO_THROW(check_plan(requests, plan));
  int64_t naive = 0;
  for (const BufferRequest& r : requests) naive += rounded(r.bytes);
  EXPECT_EQ(plan.naive_bytes, naive);
  EXPECT_EQ(plan.lower_bound_bytes, brute_lower_bound(requests, plan));
  EXPECT_LE(plan.lower_bound_bytes, plan.arena_bytes);
  EXPECT_LE(plan.arena_bytes, plan.naive_bytes);
  const int64_t greedy = std::min(plan.by_size_bytes, plan.by_order_bytes);
  if (plan.perturbed_tries == 0) {
    EXPECT_EQ(plan.arena_bytes, greedy);
    EXPECT_EQ(plan.strategy, plan.by_size_bytes <= plan.by_order_bytes ? MemoryStrategy::BySize
                                                                        : MemoryStrategy::ByOrder);
  } else {
    // Perturbed orders run only above the bound, and stop at it or after the limit.
    EXPECT_GT(greedy, plan.lower_bound_bytes);
    EXPECT_EQ(plan.arena_bytes, std::min(greedy, plan.perturbed_bytes));
    EXPECT_TRUE(plan.perturbed_tries == MemoryPlanOptions{}.perturbed_tries ||
                plan.arena_bytes == plan.lower_bound_bytes);
    EXPECT_EQ(plan.strategy == MemoryStrategy::BySizePerturbed, plan.perturbed_bytes < greedy);
  }
  for (const InplaceReuse& u : plan.inplace) EXPECT_EQ(requests[u.buffer].inplace_of, u.reused);
  // Each strategy alone must be valid too, and be what the combined plan reported.
  MemoryPlanOptions size_only, order_only, no_inplace, off;
  size_only.by_order = false;
  size_only.perturbed_tries = 0;
  order_only.by_size = false;
  order_only.perturbed_tries = 0;
  no_inplace.inplace = false;
  no_inplace.perturbed_tries = 0;
  off.enabled = false;
  const MemoryPlan by_size = plan_memory(requests, size_only);
  const MemoryPlan by_order = plan_memory(requests, order_only);
  EXPECT_NO_THROW(check_plan(requests, by_size));
  EXPECT_NO_THROW(check_plan(requests, by_order));
  EXPECT_EQ(by_size.arena_bytes, plan.by_size_bytes);
  EXPECT_EQ(by_order.arena_bytes, plan.by_order_bytes);
  const MemoryPlan plain = plan_memory(requests, no_inplace);
  EXPECT_NO_THROW(check_plan(requests, plain));
  EXPECT_TRUE(plain.inplace.empty());
  EXPECT_LE(plain.lower_bound_bytes, plain.arena_bytes);
  const MemoryPlan unplanned = plan_memory(requests, off);
  EXPECT_NO_THROW(check_plan(requests, unplanned));
  EXPECT_EQ(unplanned.arena_bytes, naive);
  // The same requests give the same plan (plans are cached and compared across runs).
  EXPECT_EQ(plan_memory(requests, MemoryPlanOptions{}).offsets, plan.offsets);
  return plan;
}

struct RatioStats {
  int cases = 0, exact = 0, within_10 = 0;
  double sum = 0, worst = 0;
  void add(const MemoryPlan& p) {
    if (p.lower_bound_bytes == 0) return;
    const double r = double(p.arena_bytes) / double(p.lower_bound_bytes);
    ++cases;
    exact += p.arena_bytes == p.lower_bound_bytes;
    within_10 += r <= 1.10;
    sum += r;
    worst = std::max(worst, r);
  }
  void print(const char* family) const {
    std::printf("[ ratio    ] %-22s %5d cases: arena/lower bound mean %.4f, worst %.4f, "
                "exact %.1f%%, within 10%% %.1f%%\n",
                family, cases, sum / std::max(cases, 1), worst, 100.0 * exact / std::max(cases, 1),
                100.0 * within_10 / std::max(cases, 1));
  }
};

void run_family(const char* family, int cases,
                const std::function<std::vector<BufferRequest>(std::mt19937_64&)>& make) {
  RatioStats stats;
  for (int seed = 0; seed < cases; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<BufferRequest> requests = make(rng);
    stats.add(check_all(requests, std::string(family) + " seed " + std::to_string(seed)));
    if (::testing::Test::HasFailure()) return;  // one failing seed says enough
  }
  stats.print(family);
}

TEST(MemoryPlanRandom, RandomIntervals) { run_family("random intervals", 1000, random_intervals); }

TEST(MemoryPlanRandom, RandomSchedules) { run_family("random schedules", 1000, random_schedule); }

TEST(MemoryPlanRandom, MlpTrainingSteps) {
  run_family("mlp training steps", 500, [](std::mt19937_64& rng) {
    std::uniform_int_distribution<int64_t> width(1, 2048), depth(1, 12), batch(1, 256);
    std::vector<int64_t> widths(depth(rng) + 1);
    for (int64_t& w : widths) w = width(rng);
    return mlp_training_step(batch(rng), widths);
  });
}

TEST(MemoryPlanRandom, FixedMlps) {
  // The shapes the bench and the examples train, printed for the report.
  for (const auto& [batch, widths] :
       std::vector<std::pair<int64_t, std::vector<int64_t>>>{{64, {784, 256, 256, 10}},
                                                             {128, {1024, 4096, 4096, 1024}},
                                                             {32, {64, 64, 64, 64, 64, 64, 64, 64}}}) {
    const std::vector<BufferRequest> requests = mlp_training_step(batch, widths);
    check_all(requests, "fixed mlp");
    const MemoryPlan plan = plan_memory(requests, MemoryPlanOptions{});
    std::printf("[ ratio    ] mlp batch %lld, %zu layers: %s", (long long)batch, widths.size() - 1,
                memory_plan_report(requests, plan).c_str());
  }
}

// A plan with one buffer moved onto another live one must be refused, for every kind of pair.
TEST(MemoryPlanRandom, CheckPlanCatchesMovedBuffers) {
  int caught = 0;
  for (int seed = 0; seed < 500; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<BufferRequest> requests = random_intervals(rng);
    const MemoryPlan plan = plan_memory(requests, MemoryPlanOptions{});
    // The first pair of non-empty buffers live together.
    for (size_t i = 0; i < requests.size(); ++i) {
      for (size_t j = 0; j < requests.size(); ++j) {
        const BufferRequest &x = requests[i], &y = requests[j];
        if (i == j || x.bytes == 0 || y.bytes == 0) continue;
        if (x.first_step > y.last_step || y.first_step > x.last_step) continue;
        // j must not be in an in-place pair: moving it would break that pair first.
        bool paired = false;
        for (const InplaceReuse& u : plan.inplace) {
          paired |= u.buffer == int64_t(j) || u.reused == int64_t(j);
        }
        if (paired) continue;
        // Move j onto i where it stays inside the arena, so overlap is the only fault.
        if (plan.offsets[i] + y.bytes > plan.arena_bytes) continue;
        MemoryPlan broken = plan;
        broken.offsets[j] = broken.offsets[i];
        try {
          check_plan(requests, broken);
          ADD_FAILURE() << "seed " << seed << ": buffers " << i << " and " << j
                        << " share offset " << broken.offsets[i] << " and were accepted";
        } catch (const Error& e) {
          EXPECT_TRUE(e.internal());
          EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
          ++caught;
        }
        i = j = requests.size();  // one pair per request set
      }
    }
  }
  EXPECT_GT(caught, 400);  // nearly every random set has two buffers live together
}

}  // namespace
}  // namespace smelt::runtime
