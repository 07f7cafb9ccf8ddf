// smelt side of `make bench`: the workloads of bench/torch_bench.py (same names, same shapes)
// plus the machine's limits, driven by bench/run.py.
//
//   smelt_bench --serve                      smelt's workloads, line protocol below (stdin/stdout)
//   smelt_bench --serve-limits               the machine's limits (impl "limit"), same protocol
//   smelt_bench --peak-memory <name> <steps> [impl]  one workload (smelt-eager unless `impl`)
//                                            in this (fresh) process: prints
//                                            {"MiB": peak RSS growth over <steps> steps}
//   smelt_bench --list                       both tables as JSON
//   smelt_bench --compile-time <name>        the first call of a compiled function in this (fresh)
//                                            process: {"first_call_ms", "pipeline_ms", "replay_ms",
//                                            "kernels", "kernels_compiled", "disk_hits",
//                                            "compile_seconds"}; run.py
//                                            sets SMELT_CACHE_DIR (empty: cold; filled: warm)
//   smelt_bench --describe <name>            builds and runs the smelt-compiled workload, prints
//                                            its fusion report and plan
//
// The limits get a process of their own: OpenBLAS keeps one thread count per process, and smelt
// sets it to 1 for its own GEMM (see src/kernels/gemm_openblas.cpp), while the sgemm ceiling is
// OpenBLAS with all threads; its thread pool would also compete with smelt's OpenMP threads.
//
// Protocol (tab-separated, one line each way, shared with torch_bench.py):
//   > list                  < {"threads": T, "workloads": [{"name", "bytes", "flops", "impls",
//                                                           "missing", "peak_memory"}],
//                              "compile_time": [names]}
//   > run <name> <impl> <n> < {"ms": [t1, ..., tn]}  (built and warmed up on first use; the
//                                                      first reply of a smelt-compiled workload
//                                                      adds "note": what the compile produced)
//                           < {"error": "..."}       (unknown workload, or not runnable here)
//   > profile <name> <impl> <n>  (a smelt-compiled model) n more calls with the plan's per-step
//                           < {"kernels": [{"name", "ms", "min_ms", "bytes", "flops"}]}  profile on;
//                                                      mean and fastest ms, bytes, flops per call,
//                                                      most time first
//   > quit
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/workload.h"

namespace smelt::bench {
namespace {

using nlohmann::json;

constexpr int kWarmupRuns = 3;

// Eager and compiled workloads; run.py lists rows in this order, so a compiled-only variant
// ("chain: 1000 tiny adds, unfused plan") goes right after the workload whose name it extends.
std::vector<Workload> smelt_workloads() {
  std::vector<Workload> all;
  for (auto part : {op_workloads(), training_workloads(), model_workloads()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  for (Workload& w : compiled_workloads()) {
    auto at = all.end();
    for (auto it = all.begin(); it != all.end(); ++it) {
      if (w.name.rfind(it->name, 0) == 0) at = it + 1;
    }
    all.insert(at, std::move(w));
  }
  return all;
}

// One entry per name: the impls of every workload of that name, in first-seen order.
json list_reply(const std::vector<Workload>& workloads) {
  json entries = json::array();
  std::map<std::string, size_t> index;
  for (const Workload& w : workloads) {
    auto [it, fresh] = index.emplace(w.name, entries.size());
    if (fresh) {
      entries.push_back({{"name", w.name}, {"bytes", w.bytes}, {"flops", w.flops},
                         {"impls", json::array()}, {"missing", json::object()}, {"peak_memory", false}});
    }
    json& entry = entries[it->second];
    if (w.missing.empty()) {
      entry["impls"].push_back(w.impl);
    } else {
      entry["missing"][w.impl] = w.missing;
    }
    if (w.training && w.missing.empty()) entry["peak_memory"] = true;
  }
  json compile_time = json::array();
  for (const CompileTimeCase& c : compile_time_cases()) compile_time.push_back(c.name);
  return {{"threads", omp_get_max_threads()}, {"workloads", entries}, {"compile_time", compile_time}};
}

std::vector<double> timed(const Step& step, int n) {
  std::vector<double> ms;
  ms.reserve(n);
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  return ms;
}

// The workload `name` with `impl`; with impl empty, the first runnable one of that name.
const Workload* find(const std::vector<Workload>& workloads, const std::string& name,
                     const std::string& impl = "") {
  const Workload* any = nullptr;
  for (const Workload& w : workloads) {
    if (w.name != name) continue;
    if (w.impl == impl) return &w;
    if (impl.empty() && w.missing.empty()) return &w;
    if (!any) any = &w;
  }
  return impl.empty() ? any : nullptr;
}

class Server {
 public:
  explicit Server(std::vector<Workload> workloads) : workloads_(std::move(workloads)) {}

  json run(const std::string& name, const std::string& impl, int n) {
    if (!find(workloads_, name)) return {{"error", "unknown workload '" + name + "'"}};
    const Workload* w = find(workloads_, name, impl);
    if (!w) return {{"error", "'" + name + "' has no impl '" + impl + "'"}};
    if (!w->missing.empty()) return {{"error", w->missing}};
    const std::string key = impl + "\t" + name;
    auto it = built_.find(key);
    json reply;
    if (it == built_.end()) {
      Step step = w->build();
      timed(step, kWarmupRuns);  // a compiled workload compiles its kernels in the first call
      it = built_.emplace(key, std::move(step)).first;
      if (w->note) reply["note"] = w->note();
    }
    reply["ms"] = timed(it->second, n);
    return reply;
  }

  json profile(const std::string& name, const std::string& impl, int n) {
    const Workload* w = find(workloads_, name, impl);
    if (!w || !w->profile) return {{"error", "'" + name + "' [" + impl + "] has no per-step profile"}};
    json first = run(name, impl, 1);  // builds and warms it up on first use
    if (first.contains("error")) return first;
    json kernels = json::array();
    for (const runtime::KernelProfile& k : w->profile(n)) {
      const double calls = double(std::max<int64_t>(k.calls, 1));
      kernels.push_back({{"name", k.name}, {"ms", double(k.total_ns) * 1e-6 / calls}, {"min_ms", double(k.min_ns) * 1e-6},
                         {"bytes", double(k.bytes) / calls}, {"flops", double(k.flops) / calls}});
    }
    return {{"kernels", kernels}};
  }

  int serve() {
    std::string line;
    while (std::getline(std::cin, line)) {
      std::vector<std::string> parts;
      size_t start = 0;
      for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
        parts.push_back(line.substr(start, tab - start));
      }
      parts.push_back(line.substr(start));
      json reply;
      try {
        if (parts[0] == "quit") break;
        if (parts[0] == "list") {
          reply = list_reply(workloads_);
        } else if (parts[0] == "run" && parts.size() == 4) {
          reply = run(parts[1], parts[2], std::stoi(parts[3]));
        } else if (parts[0] == "profile" && parts.size() == 4) {
          reply = profile(parts[1], parts[2], std::stoi(parts[3]));
        } else {
          reply = {{"error", "bad request '" + line + "' (list | run<TAB>name<TAB>impl<TAB>n | profile<TAB>name<TAB>impl<TAB>n | quit)"}};
        }
      } catch (const std::exception& e) {
        reply = {{"error", e.what()}};
      }
      std::cout << reply.dump() << std::endl;
    }
    return 0;
  }

 private:
  std::vector<Workload> workloads_;
  std::map<std::string, Step> built_;
};

double max_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// Peak resident memory the steps add on top of the built workload (model, optimizer, inputs):
// the same measurement as torch_bench.py --peak-memory, each in a fresh process.
int peak_memory(const std::vector<Workload>& workloads, const std::string& name, int steps,
                const std::string& impl) {
  const Workload* w = find(workloads, name, impl);
  if (!w || !w->missing.empty()) {
    std::cout << json{{"error", w ? w->missing : "unknown workload '" + name + "'"}}.dump() << "\n";
    return 1;
  }
  // The GEMM implementation pinned (unless the caller chose): SMELT_GEMM=auto times smelt's own
  // GEMM against OpenBLAS once per size class, on matrices of its own, a one-time cost of the
  // process that is no step's memory (it put 7 MiB on the transformer block's peak).
  ::setenv("SMELT_GEMM", "own", 0);
  Step step = w->build();
  double baseline = max_rss_mib();
  for (int i = 0; i < steps; ++i) step();
  double peak = max_rss_mib();
  std::cout << json{{"MiB", peak - baseline}, {"baseline_MiB", baseline}}.dump() << "\n";
  return 0;
}

int compile_time(const std::string& name) {
  for (const CompileTimeCase& c : compile_time_cases()) {
    if (c.name != name) continue;
    CompileTime t = c.measure();
    std::cout << json{{"first_call_ms", t.first_call_ms}, {"pipeline_ms", t.pipeline_ms},
                      {"replay_ms", t.replay_ms}, {"kernels", t.kernels},
                      {"kernels_compiled", t.kernels_compiled}, {"disk_hits", t.disk_hits},
                      {"compile_seconds", t.compile_seconds}}.dump()
              << "\n";
    return 0;
  }
  std::cout << json{{"error", "no compile-time case '" + name + "'"}}.dump() << "\n";
  return 1;
}

int describe(const std::vector<Workload>& workloads, const std::string& name) {
  const Workload* w = find(workloads, name, "smelt-compiled");
  if (!w || !w->missing.empty()) {
    std::fprintf(stderr, "smelt_bench: no runnable smelt-compiled workload '%s'\n", name.c_str());
    return 1;
  }
  Step step = w->build();
  timed(step, kWarmupRuns);
  std::vector<double> ms = timed(step, 5);
  std::printf("%s\n%s\n%s\nms per call:", name.c_str(), w->note().c_str(), w->plan().c_str());
  for (double t : ms) std::printf(" %.4g", t);
  std::printf("\n");
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: smelt_bench --serve | --serve-limits | --list | --peak-memory <workload> <steps> [impl]\n"
               "                   | --compile-time <name> | --describe <name>\n");
  return 2;
}

}  // namespace
}  // namespace smelt::bench

int main(int argc, char** argv) {
  using namespace smelt::bench;
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args[0] == "--serve") return Server(smelt_workloads()).serve();
    if (args.size() == 1 && args[0] == "--serve-limits") return Server(limit_workloads()).serve();
    if (args.size() == 1 && args[0] == "--list") {
      std::cout << list_reply(smelt_workloads()).dump(2) << "\n"
                << list_reply(limit_workloads()).dump(2) << "\n";
      return 0;
    }
    if (args.size() == 2 && args[0] == "--compile-time") return compile_time(args[1]);
    if (args.size() == 2 && args[0] == "--describe") return describe(smelt_workloads(), args[1]);
    if ((args.size() == 3 || args.size() == 4) && args[0] == "--peak-memory") {
      return peak_memory(smelt_workloads(), args[1], std::stoi(args[2]),
                         args.size() == 4 ? args[3] : "smelt-eager");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "smelt_bench: %s\n", e.what());
    return 1;
  }
  return usage();
}
