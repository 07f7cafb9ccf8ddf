// smelt compile: runs the compile pipeline over a text IR file and shows what it made.
//
//   smelt compile model.ir                  fusion groups, kernels (their loop text), plan, arena
//   smelt compile model.ir --run            + runs the plan on random inputs and compares it
//                                             with the unoptimized graph on the interpreter
//   smelt compile model.ir --bench          + times the plan against the interpreter
//   smelt compile model.ir --backend cpp    generated C++ (default: auto, tiered)
//   smelt compile model.ir --profile t.json per-step table, and a Chrome trace (Perfetto)
//   smelt compile model.ir --arena-svg a.svg  the arena over the schedule
//   smelt compile model.ir --explain [--memory-budget B]
//                                           the file's graph as a training step's forward (its first
//                                           output the loss, its parameters - every floating input
//                                           when it has none - differentiated): the joint graph,
//                                           what the backward saves and recomputes at budget B and at
//                                           budget 1 (bytes with and without recomputation), and with
//                                           --arena-svg both arenas, one above the other
//
// Exit codes: 0 done, 1 bad input, 2 --run found a difference.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/loop_kernel.h"
#include "ir/printer.h"
#include "passes/bisect.h"
#include "passes/partition.h"
#include "runtime/pipeline.h"
#include "tools/commands.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt::tools {
namespace {

struct CompileArgs {
  std::string file;
  std::string passes;
  std::string backend = "auto";
  bool run = false;
  bool bench = false;
  bool no_fuse = false;
  uint64_t seed = 1;
  std::string profile;    // Chrome trace path
  std::string arena_svg;  // arena timeline path
  bool explain = false;   // the graph as a training step's forward
  double memory_budget = 0;
};

std::unique_ptr<ir::Graph> read_ir(const std::string& file) {
  std::stringstream ss;
  if (file == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream f(file);
    SMELT_CHECK(f.good()) << "compile: cannot open '" << file << "'";
    ss << f.rdbuf();
  }
  try {
    return ir::parse(ss.str());
  } catch (const Error& e) {
    SMELT_CHECK(false) << file << ": " << e.what();
  }
  return nullptr;
}

// Largest |a - b| / (1e-5 + 1e-5 |b|) over the elements, NaN matching NaN; bits_equal when every
// element has the same bits.
struct Difference {
  double worst = 0;
  bool bits_equal = true;
  bool nan_mismatch = false;
};

Difference compare(const Tensor& got, const Tensor& want) {
  Difference d;
  std::vector<double> a = got.to_vector(), b = want.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) d.bits_equal = false;
    if (std::isnan(a[i]) != std::isnan(b[i])) d.nan_mismatch = true;
    if (std::isnan(a[i]) || std::isnan(b[i]) || a[i] == b[i]) continue;
    d.worst = std::max(d.worst, std::fabs(a[i] - b[i]) / (1e-5 + 1e-5 * std::fabs(b[i])));
  }
  return d;
}

double median_ms(const std::function<void()>& fn, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto s = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The joint forward+backward graph of a training step whose forward is `forward`: its first
// output is the loss; its Param inputs are differentiated (every floating input when it has none).
// Inputs: the forward's, then the loss tangent. Outputs: the forward's, then the gradients.
std::unique_ptr<ir::Graph> training_joint(const ir::Graph& forward) {
  SMELT_CHECK(!forward.outputs().empty() && dtype_is_floating(forward.outputs()[0]->meta.dtype))
      << "compile --explain: the graph's first output must be a floating loss";
  std::vector<bool> wrt;
  bool params = false;
  for (const ir::Value* v : forward.inputs()) params = params || v->kind == ir::ValueKind::Param;
  bool any = false;
  for (const ir::Value* v : forward.inputs()) {
    wrt.push_back(dtype_is_floating(v->meta.dtype) && (!params || v->kind == ir::ValueKind::Param));
    any = any || wrt.back();
  }
  SMELT_CHECK(any) << "compile --explain: the graph has no floating input to differentiate";
  std::vector<bool> differentiated(forward.outputs().size(), false);
  differentiated[0] = true;
  trace::Vjp vjp = trace::trace_vjp(forward, wrt, differentiated);
  SMELT_CHECK(!vjp.grad_of.empty()) << "compile --explain: the loss depends on no differentiated input";
  return std::move(vjp.graph);
}

// The training step's plan at `budget`: the passes, the recomputation the min cut chooses, fusion.
runtime::CompiledGraph compile_training(const ir::Graph& joint, size_t tangent, double budget,
                                        runtime::PipelineOptions options, passes::Recomputation* chosen) {
  std::unique_ptr<ir::Graph> graph = joint.clone();
  runtime::optimize_graph(*graph, options);
  *chosen = passes::recompute_in_backward(*graph, tangent, budget);
  options.optimize = false;
  return runtime::compile_graph(std::move(graph), options);
}

// Two SVG documents one above the other, each under its title.
std::string stacked_svg(const std::vector<std::pair<std::string, std::string>>& titled) {
  auto number = [](const std::string& svg, const char* attr) {
    const size_t at = svg.find(std::string(attr) + "=\"");
    return at == std::string::npos ? 0.0 : std::atof(svg.c_str() + at + std::strlen(attr) + 2);
  };
  double width = 0, y = 0;
  std::string body;
  for (const auto& [title, svg] : titled) {
    width = std::max(width, number(svg, "width"));
    body += "<text x=\"8\" y=\"" + std::to_string(y + 18) + "\" font-family=\"sans-serif\" font-size=\"14\">" +
            title + "</text>\n";
    std::string inner = svg;
    const size_t open = inner.find("<svg");
    if (open != std::string::npos) inner.insert(open + 4, " y=\"" + std::to_string(y + 24) + "\"");
    body += inner + "\n";
    y += 24 + number(svg, "height") + 16;
  }
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(y) + "\">\n" + body + "</svg>\n";
}

int run_compile(const CompileArgs& args) {
  std::unique_ptr<ir::Graph> graph = read_ir(args.file);
  runtime::PipelineOptions options;
  options.passes = args.passes;
  options.fuse = !args.no_fuse;
  options.backend = runtime::backend_from_name(args.backend);
  std::string budget1_svg;
  runtime::CompiledGraph c;
  if (args.explain) {
    const size_t tangent = graph->inputs().size();
    graph = training_joint(*graph);
    std::printf("== joint forward+backward graph\n%s\n", ir::print(*graph).c_str());
    passes::Recomputation at_budget, at_one;
    runtime::CompiledGraph one = compile_training(*graph, tangent, 1.0, options, &at_one);
    c = compile_training(*graph, tangent, args.memory_budget, options, &at_budget);
    std::printf("== what the backward keeps at memory_budget %g\n%s\n", args.memory_budget, at_budget.explain().c_str());
    std::printf("== at memory_budget 1 (recomputing nothing): arena %lld bytes; at %g: %lld bytes\n\n",
                static_cast<long long>(one.plan->stats().arena_bytes), args.memory_budget,
                static_cast<long long>(c.plan->stats().arena_bytes));
    budget1_svg = one.plan->arena_svg();
  } else {
    c = runtime::compile_graph(graph->clone(), options);
  }
  std::unique_ptr<ir::Graph> original = std::move(graph);
  std::printf("== fusion\n%s\n", c.fusion_explain.c_str());
  std::printf("== graph after passes and fusion\n%s\n", ir::print(*c.graph).c_str());
  std::vector<const codegen::LoopKernel*> kernels = c.plan->kernels();
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::printf("== kernel %zu: %s\n%s\n", i, kernels[i]->name.c_str(), codegen::print_kernel(*kernels[i]).c_str());
  }
  std::printf("== plan\n%s", c.plan->describe().c_str());
  std::printf("== memory\n%s\n", c.plan->memory_report().c_str());
  if (!args.arena_svg.empty()) {
    std::ofstream svg(args.arena_svg);
    SMELT_CHECK(svg.good()) << "compile: cannot write '" << args.arena_svg << "'";
    if (args.explain) {
      char title[96];
      std::snprintf(title, sizeof title, "memory_budget %g (recomputing what the min cut chose)", args.memory_budget);
      svg << stacked_svg({{title, c.plan->arena_svg()}, {"memory_budget 1 (recomputing nothing)", budget1_svg}});
    } else {
      svg << c.plan->arena_svg();
    }
    std::printf("arena timeline written to %s\n", args.arena_svg.c_str());
  }
  std::printf("== metrics\nnodes %zu -> %zu; %s\ncompile time %.1f ms\n", c.nodes_before, c.nodes_after,
              c.fusion_summary.c_str(), c.compile_ms);
  if (!args.run && !args.bench && args.profile.empty()) return 0;
  std::vector<Tensor> inputs = passes::random_inputs(*original, args.seed);
  std::vector<Tensor> want = trace::interpret(*original, inputs);
  std::vector<Tensor> got = c.plan->run(inputs);
  int status = 0;
  if (args.run) {
    std::printf("== run (seed %llu) against the unoptimized graph on the interpreter\n",
                static_cast<unsigned long long>(args.seed));
    for (size_t i = 0; i < got.size(); ++i) {
      Difference d = compare(got[i], want[i]);
      const bool ok = !d.nan_mismatch && d.worst <= 1;
      std::printf("output %zu %s %s: %s\n", i, dtype_name(got[i].dtype()), shape_str(got[i].shape()).c_str(),
                  d.bits_equal ? "bit-identical"
                  : ok         ? "equal within rtol 1e-5 / atol 1e-5"
                               : "DIFFERS");
      if (!ok) status = 2;
    }
  }
  if (args.bench) {
    const int reps = 20;
    const double interp = median_ms([&] { trace::interpret(*original, inputs); }, reps);
    const double plan = median_ms([&] { c.plan->run(inputs); }, reps);
    std::printf("== bench (median of %d)\ninterpreter, unoptimized %.3f ms\ncompiled plan %.3f ms (%.2fx)\n", reps,
                interp, plan, interp / plan);
  }
  if (!args.profile.empty()) {
    c.plan->set_profiling(true);
    for (int i = 0; i < 10; ++i) c.plan->run(inputs);
    std::printf("== profile (10 runs)\n%s", c.plan->profile().table().c_str());
    c.plan->profile().write_chrome_trace(args.profile);
    std::printf("Chrome trace written to %s (open it in Perfetto)\n", args.profile.c_str());
  }
  return status;
}

}  // namespace

void register_compile(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "compile a text IR file: fusion, kernels, memory plan");
  cmd->add_option("file", args->file, "the IR file (- for stdin)")->required();
  cmd->add_option("--passes", args->passes, "passes before fusion (default: the default pipeline)");
  cmd->add_option("--backend", args->backend, "auto (tiered), interpreter or cpp")
      ->check(CLI::IsMember({"auto", "interpreter", "cpp"}));
  cmd->add_flag("--run", args->run, "run on random inputs and compare with the interpreter");
  cmd->add_flag("--bench", args->bench, "time the plan against the interpreter");
  cmd->add_flag("--no-fuse", args->no_fuse, "skip fusion (every op its own step)");
  cmd->add_option("--seed", args->seed, "seed of the random inputs");
  cmd->add_option("--profile", args->profile, "run 10 times with per-step profiling; write a Chrome trace here");
  cmd->add_option("--arena-svg", args->arena_svg, "write the arena timeline (SVG) here");
  cmd->add_flag("--explain", args->explain,
                "the graph as a training step's forward (first output: the loss): what its backward saves and "
                "recomputes, at --memory-budget and at 1");
  cmd->add_option("--memory-budget", args->memory_budget, "with --explain: 0 (keep the least) to 1 (recompute nothing)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([args] {
    const int status = run_compile(*args);
    if (status != 0) {
      std::fflush(stdout);
      std::exit(status);
    }
  });
}

}  // namespace smelt::tools
