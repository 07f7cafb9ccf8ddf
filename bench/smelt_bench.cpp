// smelt side of `make bench`: the workloads of bench/torch_bench.py (same names, same shapes)
// plus the machine's limits, driven by bench/run.py.
//
//   smelt_bench --serve                      smelt's workloads, line protocol below (stdin/stdout)
//   smelt_bench --serve-limits               the machine's limits (impl "limit"), same protocol
//   smelt_bench --peak-memory <name> <steps> one workload in this (fresh) process: prints
//                                            {"MiB": peak RSS growth over <steps> steps}
//   smelt_bench --list                       both tables as JSON
//
// The limits get a process of their own: OpenBLAS keeps one thread count per process, and smelt
// sets it to 1 for its own GEMM (see src/kernels/gemm_openblas.cpp), while the sgemm ceiling is
// OpenBLAS with all threads; its thread pool would also compete with smelt's OpenMP threads.
//
// Protocol (tab-separated, one line each way, shared with torch_bench.py):
//   > list                  < {"threads": T, "workloads": [{"name", "bytes", "flops", "impls",
//                                                           "missing", "peak_memory"}]}
//   > run <name> <impl> <n> < {"ms": [t1, ..., tn]}  (built and warmed up on first use)
//                           < {"error": "..."}       (unknown workload, or not runnable here)
//   > quit
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
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

std::vector<Workload> smelt_workloads() {
  std::vector<Workload> all;
  for (auto part : {op_workloads(), training_workloads(), future_workloads()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

json list_reply(const std::vector<Workload>& workloads) {
  json entries = json::array();
  for (const Workload& w : workloads) {
    json entry = {{"name", w.name}, {"bytes", w.bytes}, {"flops", w.flops},
                  {"impls", json::array()}, {"missing", json::object()},
                  {"peak_memory", w.training && w.missing.empty()}};
    if (w.missing.empty()) {
      entry["impls"].push_back(w.impl);
    } else {
      entry["missing"][w.impl] = w.missing;
    }
    entries.push_back(entry);
  }
  return {{"threads", omp_get_max_threads()}, {"workloads", entries}};
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

const Workload* find(const std::vector<Workload>& workloads, const std::string& name) {
  for (const Workload& w : workloads) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

class Server {
 public:
  explicit Server(std::vector<Workload> workloads) : workloads_(std::move(workloads)) {}

  json run(const std::string& name, const std::string& impl, int n) {
    const Workload* w = find(workloads_, name);
    if (!w) return {{"error", "unknown workload '" + name + "'"}};
    if (impl != w->impl) return {{"error", "'" + name + "' has no impl '" + impl + "'"}};
    if (!w->missing.empty()) return {{"error", w->missing}};
    auto it = built_.find(name);
    if (it == built_.end()) {
      Step step = w->build();
      timed(step, kWarmupRuns);
      it = built_.emplace(name, std::move(step)).first;
    }
    return {{"ms", timed(it->second, n)}};
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
        } else {
          reply = {{"error", "bad request '" + line + "' (list | run<TAB>name<TAB>impl<TAB>n | quit)"}};
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
int peak_memory(const std::vector<Workload>& workloads, const std::string& name, int steps) {
  const Workload* w = find(workloads, name);
  if (!w || !w->missing.empty()) {
    std::cout << json{{"error", w ? w->missing : "unknown workload '" + name + "'"}}.dump() << "\n";
    return 1;
  }
  Step step = w->build();
  double baseline = max_rss_mib();
  for (int i = 0; i < steps; ++i) step();
  double peak = max_rss_mib();
  std::cout << json{{"MiB", peak - baseline}, {"baseline_MiB", baseline}}.dump() << "\n";
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: smelt_bench --serve | --serve-limits | --list | --peak-memory <workload> <steps>\n");
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
    if (args.size() == 3 && args[0] == "--peak-memory") {
      return peak_memory(smelt_workloads(), args[1], std::stoi(args[2]));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "smelt_bench: %s\n", e.what());
    return 1;
  }
  return usage();
}
