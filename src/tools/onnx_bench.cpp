// smelt bench: times an ONNX model unoptimized (the IR interpreter, one eager kernel per node) and
// compiled (passes, fusion, memory plan, generated kernels, the plan replayed), on random inputs.
//
//   smelt bench model.onnx                        warm-up 3, 20 timed runs each
//   smelt bench model.onnx --warmup 5 --reps 50 --dim batch=8
//   smelt bench model.onnx --profile              + the compiled plan's per-kernel profile
//   smelt bench model.onnx --backend auto         kernels on the tile interpreter until g++ is done
//                                                 (default cpp: compiled before the first run)
//
// Prints median and p90 latency of both, the speedup, what the compile made (kernels, op steps,
// arena bytes against the naive total and the lower bound) and whether the two agree on the
// outputs. Progress goes to stderr (redrawn in place on a terminal).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "tools/commands.h"
#include "tools/model_engine.h"
#include "tools/options.h"

namespace smelt::tools {
namespace {

struct BenchArgs {
  std::string model;
  std::vector<std::string> dims;
  int warmup = 3;
  int reps = 20;
  uint64_t seed = 1;
  std::string backend = "cpp";
  bool profile = false;
  bool no_interpreter = false;
};

struct Timing {
  double median = 0, p90 = 0, min = 0;
};

// Runs `fn` warmup + reps times; shows "label: run i/n" on stderr as it goes.
Timing time_runs(const std::string& label, int warmup, int reps, const std::function<void()>& fn) {
  const bool tty = isatty(fileno(stderr)) != 0;
  std::vector<double> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    if (tty) std::fprintf(stderr, "\r\033[K%s: %s %d/%d", label.c_str(), i < warmup ? "warm-up" : "run",
                          i < warmup ? i + 1 : i - warmup + 1, i < warmup ? warmup : reps);
    const auto s = std::chrono::steady_clock::now();
    fn();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
    if (i >= warmup) ms.push_back(t);
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  t.p90 = ms[std::min(ms.size() - 1, size_t(std::ceil(0.9 * double(ms.size()))) - 1)];
  t.min = ms.front();
  return t;
}

void progress(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::fflush(stderr);
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  return buf;
}

// Largest |a - b| over the outputs, and whether every element is within atol + rtol |b|.
std::pair<double, bool> agreement(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double worst = 0;
  bool ok = got.size() == want.size();
  for (size_t k = 0; ok && k < got.size(); ++k) {
    ok = got[k].shape() == want[k].shape() && got[k].dtype() == want[k].dtype();
    if (!ok) break;
    const std::vector<double> a = got[k].to_vector(), b = want[k].to_vector();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) || std::isnan(b[i])) {
        ok = ok && std::isnan(a[i]) && std::isnan(b[i]);
        continue;
      }
      const double d = std::fabs(a[i] - b[i]);
      worst = std::max(worst, d);
      ok = ok && d <= 1e-4 + 1e-3 * std::fabs(b[i]);
    }
  }
  return {worst, ok};
}

int run_bench(const BenchArgs& args) {
  const onnx::ModelInfo info = onnx::inspect(args.model);
  onnx::ImportOptions options;
  options.dims = parse_dims(args.dims, "bench");
  Generator gen(args.seed);
  std::vector<Tensor> inputs;
  std::printf("model %s: opset %lld, %zu nodes, %zu initializers\n", args.model.c_str(),
              static_cast<long long>(info.opsets.count("") ? info.opsets.at("") : 0), info.num_nodes,
              info.num_initializers);
  for (const onnx::ValueInfo& v : info.inputs) {
    inputs.push_back(random_model_input(declared_shape(v, options.dims, "bench"), v.dtype, gen));
    std::printf("input  %s: %s %s (random, seed %llu)\n", v.name.c_str(), dtype_name(inputs.back().dtype()),
                shape_str(inputs.back().shape()).c_str(), static_cast<unsigned long long>(args.seed));
  }
  progress("importing ...");
  onnx::Model m = onnx::import_model(args.model, options);
  std::printf("imported: %zu graph nodes\n", m.graph.num_nodes());
  Graph unoptimized = m.graph.clone();
  std::vector<Tensor> want;
  Timing interp;
  if (!args.no_interpreter) {
    want = unoptimized.run(inputs);
    interp = time_runs("unoptimized (interpreter)", args.warmup, args.reps, [&] { unoptimized.run(inputs); });
    std::printf("unoptimized (IR interpreter): median %.3f ms, p90 %.3f ms, min %.3f ms (%d runs after %d warm-up)\n",
                interp.median, interp.p90, interp.min, args.reps, args.warmup);
    std::fflush(stdout);
  }
  const char* how = args.backend == "cpp"         ? "every kernel through the C++ compiler or the disk cache"
                    : args.backend == "interpreter" ? "kernels on the tile interpreter"
                                                    : "the tile interpreter until the generated C++ is ready";
  progress(("compiling (backend " + args.backend + ": " + how + ") ...").c_str());
  EngineOptions engine_options;
  engine_options.compile = true;
  engine_options.backend = args.backend;
  ModelEngine engine(std::move(m.graph), engine_options);
  runtime::CompiledGraph& c = *engine.compiled();
  const runtime::PlanStats& s = c.plan->stats();
  std::printf("compiled in %.0f ms: %zu -> %zu nodes after passes and fusion; %d steps: %d kernels (%d with a "
              "matmul/conv epilogue in its tiles), %d op steps, %d interpreted groups, %d hoisted\n",
              c.compile_ms, c.nodes_before, c.nodes_after, s.steps, s.kernels, s.tiled_contractions, s.op_steps,
              s.interpreted, s.hoisted);
  std::printf("arena %s (naive %s, lower bound %s)\n", mib(s.arena_bytes).c_str(), mib(s.naive_bytes).c_str(),
              mib(s.lower_bound).c_str());
  if (!c.fusion_summary.empty()) std::printf("fusion: %s\n", c.fusion_summary.c_str());
  std::fflush(stdout);
  const std::vector<Tensor> got = engine.run(inputs);
  const Timing plan = time_runs("compiled plan", args.warmup, args.reps, [&] { engine.run(inputs); });
  std::printf("compiled plan: median %.3f ms, p90 %.3f ms, min %.3f ms (%d runs after %d warm-up)\n", plan.median,
              plan.p90, plan.min, args.reps, args.warmup);
  int status = 0;
  if (!args.no_interpreter) {
    const auto [worst, ok] = agreement(got, want);
    std::printf("speedup %.2fx (median); outputs %s the interpreter's (max |difference| %.3g; rtol 1e-3, atol 1e-4)\n",
                interp.median / plan.median, ok ? "agree with" : "DIFFER from", worst);
    if (!ok) status = 2;
  }
  if (args.profile) {
    c.plan->set_profiling(true);
    for (int i = 0; i < args.reps; ++i) engine.run(inputs);
    std::printf("== per-kernel profile of the compiled plan (%d runs)\n%s", args.reps,
                c.plan->profile().table().c_str());
  }
  return status;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "time an ONNX model: unoptimized (interpreter) vs compiled plan");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("--dim", args->dims, "NAME=VALUE for a symbolic dim");
  cmd->add_option("--warmup", args->warmup, "untimed runs first (default 3)")->check(integer_in(0, 100000));
  cmd->add_option("--reps", args->reps, "timed runs (default 20)")->check(integer_in(1, 100000));
  cmd->add_option("--seed", args->seed, "seed of the random inputs")->check(any_uint64());
  cmd->add_option("--backend", args->backend, "who runs the fused kernels: cpp (default), auto, interpreter")
      ->check(CLI::IsMember({"auto", "interpreter", "cpp"}));
  cmd->add_flag("--profile", args->profile, "also print the compiled plan's per-kernel profile");
  cmd->add_flag("--no-interpreter", args->no_interpreter, "time the compiled plan only");
  cmd->callback([args] {
    const int status = run_bench(*args);
    if (status != 0) {
      std::fflush(stdout);
      std::exit(status);
    }
  });
}

}  // namespace smelt::tools
