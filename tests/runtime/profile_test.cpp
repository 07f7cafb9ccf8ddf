// The per-kernel profile: aggregates, the table, the Chrome trace (parsed back), recording from
// many threads, the event limit, and nothing recorded while disabled.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/profile.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt::runtime {
namespace {

using nlohmann::json;
using testing::expect_error;

// The cells of the table row that starts with `name`, split on spaces.
std::vector<std::string> row(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::istringstream cells(line);
    std::vector<std::string> out;
    for (std::string c; cells >> c;) out.push_back(c);
    return out;
  }
  return {};
}

TEST(Profile, DisabledRecordsNothing) {
  Profile p;
  EXPECT_FALSE(p.enabled());
  const int32_t k = p.kernel_id("gemm");
  p.record(k, 100, 10, 10);
  p.record("add", 100, 10, 10);
  { ProfileScope s(p, k, 1, 1); }
  EXPECT_TRUE(p.kernels().empty());
  EXPECT_TRUE(p.events().empty());
  const json trace = json::parse(p.chrome_trace_json());
  for (const json& e : trace["traceEvents"]) EXPECT_NE(e["ph"], "X");
}

TEST(Profile, AggregatesPerKernel) {
  Profile p(true);
  const int32_t gemm = p.kernel_id("gemm"), add = p.kernel_id("add");
  EXPECT_EQ(p.kernel_id("gemm"), gemm);
  EXPECT_NE(gemm, add);
  p.record(gemm, 3000, 6000, 9000);
  p.record(gemm, 1000, 2000, 3000);
  p.record("add", 600, 4000, 0);
  p.record("never", 0, 0, 0);  // a zero-time call still counts
  const std::vector<KernelProfile> ks = p.kernels();
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0].name, "gemm");  // most time first
  EXPECT_EQ(ks[0].calls, 2);
  EXPECT_EQ(ks[0].total_ns, 4000);
  EXPECT_EQ(ks[0].min_ns, 1000);
  EXPECT_EQ(ks[0].max_ns, 3000);
  EXPECT_EQ(ks[0].bytes, 8000);
  EXPECT_EQ(ks[0].flops, 12000);
  EXPECT_EQ(ks[1].name, "add");
  EXPECT_EQ(ks[1].calls, 1);
  EXPECT_EQ(ks[2].name, "never");
  EXPECT_EQ(p.events().size(), 4u);

  // gemm: 2 calls, 0.004 ms, mean 2 us, min 1 us, 8000 B / 4000 ns = 2 GB/s, 3 GFLOP/s, 4000/4600 of the time.
  const std::string table = p.table();
  EXPECT_EQ(row(table, "gemm"),
            (std::vector<std::string>{"gemm", "2", "0.004", "2.000", "1.000", "2.00", "3.00", "87.0%"}))
      << table;
  EXPECT_EQ(row(table, "add"),
            (std::vector<std::string>{"add", "1", "0.001", "0.600", "0.600", "6.67", "0.00", "13.0%"}))
      << table;
  EXPECT_EQ(row(table, "total"), (std::vector<std::string>{"total", "4", "0.005"})) << table;
  EXPECT_EQ(row(table, "never"),
            (std::vector<std::string>{"never", "1", "0.000", "0.000", "0.000", "0.00", "0.00", "0.0%"}));
  EXPECT_EQ(row(table, "kernel").size(), 12u) << table;  // the header: "total ms", "mean us", "min us"

  p.clear();
  EXPECT_TRUE(p.kernels().empty());
  EXPECT_TRUE(p.events().empty());
  EXPECT_EQ(p.kernel_id("add"), add);  // ids survive clear()
}

TEST(Profile, ChromeTraceParsesBack) {
  Profile p(true);
  const int32_t k = p.kernel_id("fused \"gelu\"\n#1");
  const int64_t t0 = p.now_ns();
  p.record_span(k, t0, t0 + 2500, 100, 200);
  p.record("softmax", 1000, 8, 16);
  const json trace = json::parse(p.chrome_trace_json());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::vector<json> calls;
  std::set<int> named_threads;
  for (const json& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] == "X") calls.push_back(e);
    if (e["ph"] == "M" && e["name"] == "thread_name") named_threads.insert(e["tid"].get<int>());
  }
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["name"], "fused \"gelu\"\n#1");
  EXPECT_DOUBLE_EQ(calls[0]["ts"].get<double>(), double(t0) * 1e-3);
  EXPECT_DOUBLE_EQ(calls[0]["dur"].get<double>(), 2.5);
  EXPECT_EQ(calls[0]["args"]["bytes"], 100);
  EXPECT_EQ(calls[0]["args"]["flops"], 200);
  EXPECT_EQ(calls[1]["name"], "softmax");
  EXPECT_DOUBLE_EQ(calls[1]["dur"].get<double>(), 1.0);
  // record() without a start time: the call ended when it was recorded.
  const double end_us = calls[1]["ts"].get<double>() + calls[1]["dur"].get<double>();
  EXPECT_GE(end_us, double(t0) * 1e-3);
  EXPECT_LE(end_us, double(p.now_ns()) * 1e-3);
  EXPECT_EQ(calls[0]["tid"], calls[1]["tid"]);
  EXPECT_EQ(named_threads, std::set<int>{calls[0]["tid"].get<int>()});
  EXPECT_EQ(trace["otherData"]["dropped_events"], 0);
}

TEST(Profile, NamesThatAreNotUtf8StillGiveValidJson) {
  Profile p(true);
  p.record(std::string("bad\xff\xfe name"), 10, 0, 0);
  const json trace = json::parse(p.chrome_trace_json());
  bool found = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") found = e["name"].get<std::string>().rfind("bad", 0) == 0;
  }
  EXPECT_TRUE(found);
}

TEST(Profile, ManyThreadsRecordEveryCall) {
  Profile p(true);
  const int32_t k = p.kernel_id("k");
  constexpr int kThreads = 8, kCalls = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        if (i % 2) {
          p.record(k, 1, 2, 3);
        } else {
          ProfileScope s(p, k, 2, 3);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<KernelProfile> ks = p.kernels();
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].calls, kThreads * kCalls);
  EXPECT_EQ(ks[0].bytes, 2 * kThreads * kCalls);
  EXPECT_EQ(ks[0].flops, 3 * kThreads * kCalls);
  std::set<int32_t> tids;
  for (const ProfileEvent& e : p.events()) tids.insert(e.thread);
  EXPECT_EQ(tids.size(), size_t(kThreads));
  const json trace = json::parse(p.chrome_trace_json());
  size_t calls = 0;
  for (const json& e : trace["traceEvents"]) calls += e["ph"] == "X";
  EXPECT_EQ(calls, size_t(kThreads * kCalls));
}

TEST(Profile, EventLimitKeepsCounting) {
  Profile p(true, 10);
  for (int i = 0; i < 25; ++i) p.record("k", 5, 0, 0);
  EXPECT_EQ(p.events().size(), 10u);
  EXPECT_EQ(p.dropped_events(), 15);
  EXPECT_EQ(p.kernels()[0].calls, 25);
  EXPECT_EQ(json::parse(p.chrome_trace_json())["otherData"]["dropped_events"], 15);
}

TEST(Profile, SwitchingOnAndOff) {
  Profile p;
  const int32_t k = p.kernel_id("k");
  p.record(k, 1, 0, 0);
  p.set_enabled(true);
  p.record(k, 1, 0, 0);
  { ProfileScope s(p, k, 0, 0); }
  p.set_enabled(false);
  p.record(k, 1, 0, 0);
  EXPECT_EQ(p.kernels()[0].calls, 2);
  EXPECT_GE(p.events()[1].duration_ns, 0);
}

TEST(Profile, BadRecordsAreErrors) {
  Profile p(true);
  expect_error([&] { p.record(int32_t(3), 1, 0, 0); }, {"kernel id 3", "kernel_id()"});
  const int32_t k = p.kernel_id("k");
  expect_error([&] { p.record(k, -1, 0, 0); }, "-1 ns");
  expect_error([&] { p.record(k, 1, -5, 0); }, "-5 bytes");
  expect_error([&] { p.record_span(k, 100, 50, 0, 0); }, "-50 ns");
}

class ProfileFiles : public testing::TempDirTest {};

TEST_F(ProfileFiles, WritesTheTrace) {
  Profile p(true);
  p.record("k", 7, 1, 1);
  p.write_chrome_trace(path("trace.json"));
  std::ifstream f(path("trace.json"));
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(json::parse(text.str()), json::parse(p.chrome_trace_json()));
  expect_error([&] { p.write_chrome_trace(path("missing/trace.json")); }, "missing/trace.json");
}

}  // namespace
}  // namespace smelt::runtime
