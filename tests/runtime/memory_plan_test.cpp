// The memory planner's edge cases, in-place chains, bad requests, check_plan on broken plans,
// SMELT_NO_MEMPLAN, and the report and SVG.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "runtime/memory_plan.h"
#include "support/errors.h"
#include "support/temp_dir.h"
#include "support/helpers.h"

namespace smelt::runtime {
namespace {

using testing::ScopedEnv;

using testing::expect_error;

BufferRequest req(int64_t bytes, int64_t first, int64_t last, int64_t inplace_of = -1) {
  return BufferRequest{bytes, first, last, inplace_of, ""};
}

MemoryPlan checked_plan(const std::vector<BufferRequest>& r, MemoryPlanOptions o = {}) {
  MemoryPlan p = plan_memory(r, o);
  check_plan(r, p);
  EXPECT_LE(p.lower_bound_bytes, p.arena_bytes);
  EXPECT_LE(p.arena_bytes, p.naive_bytes);
  return p;
}

// Expects check_plan to refuse `plan` as a smelt bug whose message contains `needle`.
void expect_refused(const std::vector<BufferRequest>& r, const MemoryPlan& plan,
                    const std::string& needle) {
  try {
    check_plan(r, plan);
    ADD_FAILURE() << "check_plan accepted a plan that should fail with '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_TRUE(e.internal());
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MemoryPlan, NoRequests) {
  const MemoryPlan p = checked_plan({});
  EXPECT_EQ(p.arena_bytes, 0);
  EXPECT_EQ(p.naive_bytes, 0);
  EXPECT_EQ(p.lower_bound_bytes, 0);
  EXPECT_EQ(p.lower_bound_step, -1);
  EXPECT_EQ(p.num_steps, 0);
}

TEST(MemoryPlan, ZeroByteBuffersTakeNoSpace) {
  const std::vector<BufferRequest> r{req(0, 0, 5), req(100, 1, 3), req(0, 2, 2), req(0, 0, 0)};
  const MemoryPlan p = checked_plan(r);
  EXPECT_EQ(p.arena_bytes, 128);
  EXPECT_EQ(p.naive_bytes, 128);
  EXPECT_EQ(p.offsets[0], 0);
  EXPECT_EQ(p.offsets[2], 0);
}

TEST(MemoryPlan, SizesRoundUpToTheAlignment) {
  const MemoryPlan p = checked_plan({req(1, 0, 0), req(65, 0, 0), req(64, 0, 0)});
  EXPECT_EQ(p.naive_bytes, 64 + 128 + 64);
  EXPECT_EQ(p.arena_bytes, p.naive_bytes);  // all live at step 0
  for (int64_t off : p.offsets) EXPECT_EQ(off % kArenaAlignment, 0);
}

TEST(MemoryPlan, OneStepStacksEverything) {
  std::vector<BufferRequest> r;
  for (int64_t b : {640, 64, 6400, 1, 128}) r.push_back(req(b, 0, 0));
  const MemoryPlan p = checked_plan(r);
  EXPECT_EQ(p.arena_bytes, p.naive_bytes);
  EXPECT_EQ(p.lower_bound_bytes, p.naive_bytes);
  EXPECT_EQ(p.lower_bound_step, 0);
}

TEST(MemoryPlan, DisjointLifetimesShareOneRegion) {
  std::vector<BufferRequest> r;
  for (int64_t s = 0; s < 10; ++s) r.push_back(req(1000 + s, s, s));
  const MemoryPlan p = checked_plan(r);
  EXPECT_EQ(p.arena_bytes, 1024);  // the largest, 1009 bytes, rounded
  EXPECT_EQ(p.lower_bound_bytes, p.arena_bytes);
  for (int64_t off : p.offsets) EXPECT_EQ(off, 0);
}

TEST(MemoryPlan, ABufferLiveThroughoutIsNeverShared) {
  std::vector<BufferRequest> r{req(4096, 0, 20)};
  for (int64_t s = 0; s < 20; ++s) r.push_back(req(64 * (s % 3 + 1), s, s + 1));
  const MemoryPlan p = checked_plan(r);
  for (size_t i = 1; i < r.size(); ++i) {
    EXPECT_TRUE(p.offsets[i] >= 4096 || p.offsets[i] + r[i].bytes <= p.offsets[0]) << i;
  }
}

TEST(MemoryPlan, InplaceChainUsesOneRegion) {
  // a -> b -> c -> d, each written by its predecessor's last reader, all 1 KiB.
  const std::vector<BufferRequest> r{req(1024, 0, 1), req(1024, 1, 2, 0), req(1024, 2, 3, 1),
                                     req(1024, 3, 4, 2)};
  const MemoryPlan p = checked_plan(r);
  EXPECT_EQ(p.arena_bytes, 1024);
  EXPECT_EQ(p.lower_bound_bytes, 1024);
  ASSERT_EQ(p.inplace.size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(p.inplace[k].buffer, k + 1);
    EXPECT_EQ(p.inplace[k].reused, k);
  }
  // Without in-place reuse, neighbours are live together at each handover step.
  MemoryPlanOptions no_inplace;
  no_inplace.inplace = false;
  const MemoryPlan q = checked_plan(r, no_inplace);
  EXPECT_EQ(q.arena_bytes, 2048);
  EXPECT_EQ(q.lower_bound_bytes, 2048);
  EXPECT_TRUE(q.inplace.empty());
}

TEST(MemoryPlan, InplaceOffersThatCannotBeTaken) {
  // Two buffers offered the same one: one takes it, the other gets its own memory.
  const std::vector<BufferRequest> twice{req(256, 0, 2), req(256, 2, 3, 0), req(256, 2, 4, 0)};
  const MemoryPlan a = checked_plan(twice);
  ASSERT_EQ(a.inplace.size(), 1u);
  EXPECT_EQ(a.arena_bytes, 512);
  // A larger buffer does not fit in the offered region.
  const std::vector<BufferRequest> larger{req(256, 0, 2), req(512, 2, 3, 0)};
  EXPECT_TRUE(checked_plan(larger).inplace.empty());
  // A buffer never read after it is written cannot be overwritten by the same step's output.
  const std::vector<BufferRequest> dead{req(256, 2, 2), req(256, 2, 3, 0)};
  const MemoryPlan d = checked_plan(dead);
  EXPECT_TRUE(d.inplace.empty());
  EXPECT_EQ(d.arena_bytes, 512);
  // A smaller buffer fits, and the lower bound counts the shared bytes once.
  const std::vector<BufferRequest> smaller{req(256, 0, 2), req(128, 2, 3, 0)};
  const MemoryPlan s = checked_plan(smaller);
  EXPECT_EQ(s.inplace.size(), 1u);
  EXPECT_EQ(s.lower_bound_bytes, 256);
  EXPECT_EQ(s.arena_bytes, 256);
}

TEST(MemoryPlan, BadRequestsAreErrors) {
  const MemoryPlanOptions o;
  expect_error([&] { plan_memory({req(-1, 0, 0)}, o); }, {"buffer 0", "-1 bytes"});
  expect_error([&] { plan_memory({req(8, 3, 2)}, o); }, {"buffer 0", "[3, 2]", "first_step"});
  expect_error([&] { plan_memory({req(8, -1, 2)}, o); }, "[-1, 2]");
  expect_error([&] { plan_memory({req(8, 0, 1), req(8, 1, 2, 1)}, o); }, {"buffer 1", "inplace_of 1"});
  expect_error([&] { plan_memory({req(8, 0, 1), req(8, 1, 2, 7)}, o); }, "inplace_of 7");
  expect_error([&] { plan_memory({req(8, 0, 3), req(8, 1, 2, 0)}, o); },
               {"buffer 1", "last reader is step 3"});
  expect_error([&] { plan_memory({req(int64_t(1) << 60, 0, 0)}, o); }, "bytes");
  MemoryPlanOptions none;
  none.by_size = none.by_order = false;
  expect_error([&] { plan_memory({req(8, 0, 0)}, none); }, "no strategy");
}

TEST(MemoryPlan, CheckPlanCatchesBrokenPlans) {
  const std::vector<BufferRequest> r{req(256, 0, 2), req(256, 1, 3), req(256, 2, 4, 0),
                                     req(100, 5, 6)};
  const MemoryPlan good = checked_plan(r);
  ASSERT_EQ(good.inplace.size(), 1u);

  MemoryPlan overlap = good;  // buffer 1 moved onto buffer 0 while both are live
  overlap.offsets[1] = overlap.offsets[0];
  expect_refused(r, overlap, "overlap");

  MemoryPlan partial = good;  // half over buffer 0
  partial.offsets[1] = partial.offsets[0] + 128;
  partial.arena_bytes = std::max(partial.arena_bytes, partial.offsets[1] + 256);
  expect_refused(r, partial, "overlap");

  MemoryPlan misaligned = good;
  misaligned.offsets[3] += 8;
  expect_refused(r, misaligned, "aligned");

  MemoryPlan outside = good;
  outside.offsets[3] = outside.arena_bytes;
  expect_refused(r, outside, "exceeds the arena");

  MemoryPlan small_arena = good;
  small_arena.arena_bytes -= 64;
  expect_refused(r, small_arena, "exceeds the arena");

  MemoryPlan odd_arena = good;
  odd_arena.arena_bytes += 1;
  expect_refused(r, odd_arena, "multiple");

  MemoryPlan missing = good;
  missing.offsets.pop_back();
  expect_refused(r, missing, "offsets for 4 buffers");

  MemoryPlan unoffered = good;  // claims buffer 3 reuses buffer 1: never offered
  unoffered.inplace.push_back({3, 1});
  expect_refused(r, unoffered, "was not offered");

  MemoryPlan shifted = good;  // the in-place pair at different offsets
  shifted.offsets[2] = shifted.arena_bytes;
  shifted.arena_bytes += 256;
  expect_refused(r, shifted, "in place but sits at offset");

  MemoryPlan unclaimed = good;  // buffer 2 shares buffer 0's memory without the reuse listed
  unclaimed.inplace.clear();
  expect_refused(r, unclaimed, "overlap");

  MemoryPlan too_big = good;  // arena above the naive total
  too_big.arena_bytes = good.naive_bytes + 64;
  expect_refused(r, too_big, "naive");
}

TEST(MemoryPlan, PlanningOffGivesEachBufferItsOwnRegion) {
  const std::vector<BufferRequest> r{req(100, 0, 0), req(64, 1, 1), req(0, 2, 2), req(10, 3, 4, -1),
                                     req(64, 4, 5, 3)};
  MemoryPlanOptions off;
  off.enabled = false;
  const MemoryPlan p = checked_plan(r, off);
  EXPECT_EQ(p.strategy, MemoryStrategy::None);
  EXPECT_EQ(p.arena_bytes, p.naive_bytes);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 128, 192, 192, 256}));
  EXPECT_TRUE(p.inplace.empty());
}

TEST(MemoryPlan, NoMemplanEnvironmentVariable) {
  const std::vector<BufferRequest> r{req(1000, 0, 0), req(1000, 1, 1)};
  {
    ScopedEnv env("SMELT_NO_MEMPLAN", "1");
    const MemoryPlan p = plan_memory(r);
    check_plan(r, p);
    EXPECT_EQ(p.strategy, MemoryStrategy::None);
    EXPECT_EQ(p.arena_bytes, 2048);
  }
  {
    ScopedEnv env("SMELT_NO_MEMPLAN", "0");
    EXPECT_EQ(plan_memory(r).arena_bytes, 1024);
  }
  {
    ScopedEnv env("SMELT_NO_MEMPLAN", nullptr);
    EXPECT_EQ(plan_memory(r).arena_bytes, 1024);
  }
  {
    ScopedEnv env("SMELT_NO_MEMPLAN", "yes");
    expect_error([&] { plan_memory(r); }, {"SMELT_NO_MEMPLAN", "yes", "[0, 1]"});
  }
}

class MemoryPlanFiles : public testing::TempDirTest {};

TEST_F(MemoryPlanFiles, ReportAndTimeline) {
  std::vector<BufferRequest> r{req(4096, 0, 3), req(2048, 1, 2), req(4096, 3, 5, 0),
                               req(0, 2, 2), req(1 << 20, 4, 4)};
  r[0].label = "act<0>&\"x\"";
  const MemoryPlan p = checked_plan(r);
  const std::string report = memory_plan_report(r, p);
  EXPECT_NE(report.find("5 buffers over 6 steps"), std::string::npos) << report;
  EXPECT_NE(report.find("1 in-place reuses"), std::string::npos) << report;
  EXPECT_NE(report.find(std::to_string(p.naive_bytes) + " bytes"), std::string::npos) << report;
  EXPECT_NE(report.find(std::to_string(p.arena_bytes) + " bytes"), std::string::npos) << report;
  EXPECT_NE(report.find(std::to_string(p.lower_bound_bytes) + " bytes"), std::string::npos);
  EXPECT_NE(report.find("arena / lower bound = 1.000"), std::string::npos) << report;

  const std::string svg = memory_plan_svg(r, p, "t<1>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_NE(svg.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("act&lt;0&gt;&amp;&quot;x&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("act<0>"), std::string::npos);
  // One rectangle per non-empty buffer, plus the background.
  size_t rects = 0, groups = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1)) ++rects;
  for (size_t at = svg.find("<g>"); at != std::string::npos; at = svg.find("<g>", at + 1)) ++groups;
  EXPECT_EQ(rects, 1u + 4u);
  EXPECT_EQ(groups, 4u);

  write_memory_plan_svg(path("arena.svg"), r, p, "t<1>");
  std::ifstream f(path("arena.svg"));
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), svg);
  expect_error([&] { write_memory_plan_svg(path("no/such/dir/a.svg"), r, p); }, "no/such/dir");
}

}  // namespace
}  // namespace smelt::runtime
