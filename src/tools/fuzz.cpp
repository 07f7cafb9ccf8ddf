// smelt fuzz: the differential fuzzer from the command line.
//   smelt fuzz --seed S --cases N [--max-nodes K] [--max-rank R] [--max-dim D] [--passes P]
//              [--out DIR]
//   smelt fuzz --compile [--backend interpreter|cpp|both] --seed S --cases N: each graph through
//              the compile pipeline, its plan run and compared with the unoptimized graph on the
//              interpreter, the memory plan and replay checked (fuzz/compile_fuzzer.h).
//              [--second-batch N]: every N-th case (default 10; 0: none) also runs at two
//              other sizes of its batch, a last dim or both, through compile's dynamic shapes
//              (fuzz/second_batch.h). [--gradients N]: every N-th case (default 10; 0: none) also
//              has its joint forward+backward graph split at a random memory budget, the halves
//              checked against the joint graph and compiled (fuzz/gradient_check.h).
//   smelt fuzz --autograd --seed S --cases N: the eager autograd fuzzer (fuzz/autograd_fuzzer.h)
//              instead; each failure prints its program.
//   smelt fuzz --training --seed S --cases N [--backend interpreter|cpp]: random small models
//              trained with compile_step against eager training (fuzz/training_fuzzer.h).
// Constants and inputs hold special values (NaN, ±inf, ±0, subnormals, extremes; int64 limits);
// results are compared bit for bit except where fold_batchnorm may change rounding (the rule is
// written out in fuzz/fuzzer.cpp). One line per failure, then "N passed, M failed" and counts. Failures are minimized and written to DIR
// (default tests/fuzz/regressions under the current directory is NOT assumed: pass --out).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>

#include "fuzz/autograd_fuzzer.h"
#include "fuzz/fuzzer.h"
#include "fuzz/training_fuzzer.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "tools/output_dir.h"
#include "tools/commands.h"
#include "tools/fuzz_compile.h"
#include "tools/options.h"

namespace smelt::tools {

// A billion graphs take weeks; a bigger count is a typo.
constexpr int64_t kMaxCases = 1'000'000'000;

namespace {

void run_autograd_fuzz(uint64_t first_seed, int64_t cases) {
  int64_t failed = 0, bitwise = 0, in_place_ops = 0;
  for (int64_t i = 0; i < cases; ++i) {
    uint64_t seed = first_seed + uint64_t(i);
    fuzz::AutogradCaseResult r = fuzz::check_autograd_program(seed);
    bitwise += r.bitwise;
    in_place_ops += r.in_place_ops;
    if (r.passed) continue;
    ++failed;
    std::printf("FAIL seed %llu: %s\n%s", static_cast<unsigned long long>(seed), r.message.c_str(),
                r.program.c_str());
    std::fflush(stdout);
  }
  std::printf("%lld passed, %lld failed (%lld in-place ops; %lld cases bitwise equal to the "
              "out-of-place program)\n",
              static_cast<long long>(cases - failed), static_cast<long long>(failed),
              static_cast<long long>(in_place_ops), static_cast<long long>(bitwise));
  if (failed > 0) throw CLI::RuntimeError(std::to_string(failed) + " fuzz cases failed (the FAIL lines above)", 1);
}

void run_training_fuzz(uint64_t first_seed, int64_t cases, const std::string& backend) {
  int64_t failed = 0, updates = 0, in_place = 0;
  fuzz::TrainingFuzzOptions options;
  options.backend = backend == "both" ? "interpreter" : backend;
  for (int64_t i = 0; i < cases; ++i) {
    const uint64_t seed = first_seed + uint64_t(i);
    const fuzz::TrainingCaseResult r = fuzz::check_training_case(seed, options);
    updates += r.updates;
    in_place += r.in_place;
    if (r.passed) continue;
    ++failed;
    std::printf("FAIL seed %llu: %s\n  (%s)\n", static_cast<unsigned long long>(seed), r.message.c_str(),
                r.description.c_str());
    std::fflush(stdout);
  }
  std::printf("%lld passed, %lld failed (%lld optimizer updates; %lld inputs updated in place by the last "
              "updating plans)\n",
              static_cast<long long>(cases - failed), static_cast<long long>(failed),
              static_cast<long long>(updates), static_cast<long long>(in_place));
  if (failed > 0) throw CLI::RuntimeError(std::to_string(failed) + " fuzz cases failed (the FAIL lines above)", 1);
}

}  // namespace

void register_fuzz(CLI::App& app) {
  struct Options {
    uint64_t seed = 1;
    int64_t cases = 1000;
    int max_nodes = 12;
    int max_rank = fuzz::RandomGraphOptions{}.max_rank;
    int max_dim = fuzz::RandomGraphOptions{}.max_dim;
    std::string passes = fuzz::kFuzzPipeline;
    std::string out;
    bool autograd = false;
    bool compile = false;
    bool training = false;
    std::string backend = "both";
    int batch = 128;
    int second_batch = 10;
    int gradients = 10;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("fuzz", "Random graphs: optimized vs interpreter vs eager");
  cmd->add_option("--seed", opt->seed, "first seed; case i uses seed + i")->check(any_uint64());
  cmd->add_option("--cases", opt->cases, "number of random graphs")
      ->check(integer_in<int64_t>(1, kMaxCases));
  cmd->add_option("--max-nodes", opt->max_nodes, "nodes per graph at most")->check(integer_in(1, 1000));
  cmd->add_option("--max-rank", opt->max_rank, "rank of the random input shapes at most")->check(integer_in(0, 6));
  cmd->add_option("--max-dim", opt->max_dim, "size of each dim of the random input shapes at most")->check(integer_in(1, 16));
  cmd->add_option("--passes", opt->passes, "the pipeline to test")->capture_default_str();
  cmd->add_option("--out", opt->out, "directory for minimized failing cases (.ir)");
  cmd->add_flag("--autograd", opt->autograd,
                "random eager programs with in-place ops and views: gradients vs the out-of-place "
                "program and finite differences");
  cmd->add_flag("--training", opt->training,
                "random small models trained with compile_step (the optimizer in the plan) against eager "
                "training; --backend interpreter (default for 'both') or cpp");
  cmd->add_flag("--compile", opt->compile,
                "compile each graph (passes, fusion, lowering, memory plan) and compare its plan with "
                "the unoptimized graph on the interpreter");
  cmd->add_option("--backend", opt->backend, "with --compile: the kernels' backend")
      ->check(CLI::IsMember({"interpreter", "cpp", "both"}))
      ->capture_default_str();
  cmd->add_option("--batch", opt->batch, "with --compile: cases prepared at once (cpp kernels compile together)")
      ->check(integer_in(1, 4096))
      ->capture_default_str();
  cmd->add_option("--second-batch", opt->second_batch,
                  "with --compile: every n-th case (1: each) runs again at two other sizes of its batch, a last "
                  "dim or both, through compile's dynamic shapes, compared with the interpreter; 0: none")
      ->check(integer_in(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--gradients", opt->gradients,
                  "with --compile: every n-th case (1: each) also has its joint forward+backward graph split "
                  "into the halves a differentiable compiled call runs, at a random memory budget; 0: none")
      ->check(integer_in(0, 1 << 30))
      ->capture_default_str();
  cmd->callback([opt] {
    if (!opt->out.empty()) prepare_output_dir(opt->out, "fuzz: --out");  // before any case runs
    if (opt->compile) {
      CompileFuzzArgs args;
      args.seed = opt->seed;
      args.cases = opt->cases;
      args.graphs.max_nodes = opt->max_nodes;
      args.graphs.max_rank = opt->max_rank;
      args.graphs.max_dim = opt->max_dim;
      args.passes = opt->passes;
      args.backend = opt->backend;
      args.out = opt->out;
      args.batch = opt->batch;
      args.second_batch = opt->second_batch;
      args.gradients = opt->gradients;
      run_compile_fuzz(args);
      return;
    }
    if (opt->autograd) {
      run_autograd_fuzz(opt->seed, opt->cases);
      return;
    }
    if (opt->training) {
      run_training_fuzz(opt->seed, opt->cases, opt->backend);
      return;
    }
    passes::parse_pipeline(opt->passes);  // reject an unknown pass before running anything
    fuzz::RandomGraphOptions gopt;
    gopt.max_nodes = opt->max_nodes;
    gopt.max_rank = opt->max_rank;
    gopt.max_dim = opt->max_dim;
    int64_t failed = 0, exact_outputs = 0, tolerant_outputs = 0, rounded_outputs = 0, runtime_errors = 0,
            layout_rounding = 0;
    for (int64_t i = 0; i < opt->cases; ++i) {
      uint64_t seed = opt->seed + uint64_t(i);
      auto graph = fuzz::random_graph(seed, gopt);
      fuzz::CaseResult r = fuzz::check_graph(*graph, opt->passes, seed);
      exact_outputs += r.exact_outputs;
      tolerant_outputs += r.tolerant_outputs;
      rounded_outputs += r.rounded_outputs;
      runtime_errors += r.runtime_error;
      layout_rounding += r.layout_rounding;
      if (r.passed) continue;
      ++failed;
      auto small = fuzz::minimize(*graph, opt->passes, seed);
      std::printf("FAIL seed %llu: %s (minimized to %zu nodes)\n", static_cast<unsigned long long>(seed),
                  r.message.c_str(), small->num_nodes());
      if (!opt->out.empty()) {
        std::string path = opt->out + "/seed_" + std::to_string(seed) + ".ir";
        write_text_file(path, fuzz::regression_text(*small, opt->passes, seed, r.message));
        std::printf("  written to %s\n", path.c_str());
      }
      std::fflush(stdout);
    }
    std::printf("%lld passed, %lld failed (%lld outputs compared bit for bit, %lld within the "
                "rounding tolerance of fold_batchnorm, %lld of these not bit-equal; %lld graphs "
                "equal only with contiguous reduction operands; %lld graphs failed alike in every "
                "run)\n",
                static_cast<long long>(opt->cases - failed), static_cast<long long>(failed),
                static_cast<long long>(exact_outputs), static_cast<long long>(tolerant_outputs),
                static_cast<long long>(rounded_outputs), static_cast<long long>(layout_rounding),
                static_cast<long long>(runtime_errors));
    if (failed > 0) throw CLI::RuntimeError(std::to_string(failed) + " fuzz cases failed (the FAIL lines above)", 1);
  });
}

}  // namespace smelt::tools
