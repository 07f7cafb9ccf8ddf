#include "tools/fuzz_compile.h"
#include "tools/output_dir.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <fstream>
#include <vector>

#include "codegen/kernel_cache.h"
#include "fuzz/compile_fuzzer.h"
#include "fuzz/fuzzer.h"
#include "fuzz/gradient_check.h"
#include "fuzz/second_batch.h"

namespace smelt::tools {
namespace {

struct Totals {
  int64_t cases = 0, failed = 0, exact = 0, tolerant = 0, rounded = 0, layout = 0, ill_conditioned = 0,
          runtime_errors = 0, kernels = 0, op_steps = 0, interpreted = 0;
  int64_t second = 0, second_dynamic = 0, second_failed = 0;  // --second-batch: replayed, dynamic, failed
  int64_t gradients = 0, gradients_failed = 0, saved = 0, recomputed = 0;  // --gradients
  double compile_ms = 0, wait_ms = 0, run_ms = 0;

  void add(const fuzz::CompileCaseResult& r) {
    ++cases;
    failed += !r.passed;
    exact += r.exact_outputs;
    tolerant += r.tolerant_outputs;
    rounded += r.rounded_outputs;
    layout += r.layout_rounding;
    ill_conditioned += r.ill_conditioned;
    runtime_errors += r.runtime_error;
    kernels += r.kernels;
    op_steps += r.op_steps;
    interpreted += r.interpreted_groups;
    compile_ms += r.compile_ms;
    wait_ms += r.wait_ms;
    run_ms += r.run_ms;
  }
};

std::vector<fuzz::CompileBackend> backends_of(const std::string& name) {
  if (name == "interpreter") return {fuzz::CompileBackend::Interpreter};
  if (name == "cpp") return {fuzz::CompileBackend::Cpp};
  return {fuzz::CompileBackend::Interpreter, fuzz::CompileBackend::Cpp};
}

}  // namespace

void run_compile_fuzz(const CompileFuzzArgs& args) {
  std::string passes = args.passes.empty() ? std::string(passes::kDefaultPipeline) : args.passes;
  const std::string fuse = ",fuse";
  if (passes.size() > fuse.size() && passes.compare(passes.size() - fuse.size(), fuse.size(), fuse) == 0) {
    passes.resize(passes.size() - fuse.size());
  }
  passes::parse_pipeline(passes);  // reject an unknown pass before running anything
  const std::vector<fuzz::CompileBackend> backends = backends_of(args.backend);
  for (fuzz::CompileBackend b : backends) {
    SMELT_CHECK(b != fuzz::CompileBackend::Cpp || codegen::KernelCache::global().compiler().available())
        << "fuzz --compile --backend " << args.backend << ": no C++ compiler found ("
        << codegen::KernelCache::global().compiler().missing << "); use --backend interpreter";
  }
  std::vector<Totals> totals(backends.size());
  int64_t failed_cases = 0;
  for (int64_t first = 0; first < args.cases; first += args.batch) {
    const int64_t n = std::min<int64_t>(args.batch, args.cases - first);
    // Prepare the batch, then check it. The generated kernels of the whole batch are queued first
    // and compiled together (a few compiler runs of many kernels each, on the cache's pool: what
    // get_many does for one plan), then each case waits for its own. The same kernels, the same
    // flags and the same code path as in a compiled function; only fewer compiler runs.
    std::vector<std::unique_ptr<ir::Graph>> graphs;
    std::vector<std::vector<std::unique_ptr<fuzz::PreparedCase>>> prepared(backends.size());
    codegen::KernelCache& cache = codegen::KernelCache::global();
    cache.hold_compiles();
    struct Release {  // on an exception while preparing
      codegen::KernelCache& cache;
      bool active = true;
      ~Release() {
        if (active) cache.release_compiles();
      }
    } release{cache};
    for (int64_t i = 0; i < n; ++i) {
      graphs.push_back(fuzz::random_graph(args.seed + uint64_t(first + i), args.graphs));
      for (size_t b = 0; b < backends.size(); ++b) {
        fuzz::CompileCheckOptions options;
        options.passes = passes;
        options.backend = backends[b];
        prepared[b].push_back(fuzz::prepare_compiled(*graphs.back(), options));
      }
    }
    cache.release_compiles();  // (the guard's release, early: the checks wait for the kernels)
    release.active = false;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t seed = args.seed + uint64_t(first + i);
      bool case_failed = false;
      for (size_t b = 0; b < backends.size(); ++b) {
        fuzz::CompileCaseResult r = fuzz::check_prepared(*prepared[b][size_t(i)], seed);
        prepared[b][size_t(i)].reset();
        totals[b].add(r);
        const fuzz::CompileCheckOptions options{passes, backends[b], nullptr};
        // A failure of an extra check (second batch, gradients): minimized while `fails` holds.
        auto report = [&](const char* what, const std::string& message,
                          const std::function<bool(const ir::Graph&)>& fails, const std::string& header) {
          case_failed = true;
          auto small = fuzz::minimize(*graphs[size_t(i)], fails);
          std::printf("FAIL seed %llu [%s, %s]: %s (minimized to %zu nodes)\n", static_cast<unsigned long long>(seed),
                      fuzz::compile_backend_name(backends[b]), what, message.c_str(), small->num_nodes());
          if (!args.out.empty()) {
            std::string name = what;
            std::replace(name.begin(), name.end(), ' ', '_');
            const std::string path = args.out + "/" + name + "_" + fuzz::compile_backend_name(backends[b]) +
                                     "_seed_" + std::to_string(seed) + ".ir";
            write_text_file(path, header + fuzz::compiled_regression_text(*small, options, seed, message));
            std::printf("  written to %s\n", path.c_str());
          }
          std::fflush(stdout);
        };
        if (r.passed && args.second_batch > 0 && (first + i) % args.second_batch == 0) {
          const fuzz::SecondBatchResult s = fuzz::check_second_batch(*graphs[size_t(i)], options, seed);
          totals[b].second += s.applicable;
          totals[b].second_dynamic += s.dynamic;
          totals[b].second_failed += !s.passed;
          if (!s.passed) {
            report("second batch", s.message,
                   [&](const ir::Graph& g) { return !fuzz::check_second_batch(g, options, seed).passed; },
                   "# SECOND-BATCH\n");
          }
        }
        if (r.passed && args.gradients > 0 && (first + i) % args.gradients == 0) {
          const fuzz::GradientResult g = fuzz::check_gradients(*graphs[size_t(i)], options, seed);
          totals[b].gradients += g.applicable;
          totals[b].gradients_failed += !g.passed;
          totals[b].saved += g.saved;
          totals[b].recomputed += g.recomputed;
          if (!g.passed) {
            report("gradients", g.message,
                   [&](const ir::Graph& h) { return !fuzz::check_gradients(h, options, seed).passed; },
                   "# GRADIENTS\n");
          }
        }
        if (r.passed) continue;
        case_failed = true;
        auto small = fuzz::minimize(*graphs[size_t(i)], [&](const ir::Graph& g) {
          return !fuzz::check_compiled(g, options, seed).passed;
        });
        std::printf("FAIL seed %llu [%s]: %s (minimized to %zu nodes)\n", static_cast<unsigned long long>(seed),
                    fuzz::compile_backend_name(backends[b]), r.message.c_str(), small->num_nodes());
        if (!args.out.empty()) {
          const std::string path = args.out + "/compile_" + fuzz::compile_backend_name(backends[b]) + "_seed_" +
                                   std::to_string(seed) + ".ir";
          write_text_file(path, fuzz::compiled_regression_text(*small, options, seed, r.message));
          std::printf("  written to %s\n", path.c_str());
        }
        std::fflush(stdout);
      }
      failed_cases += case_failed;
    }
  }
  for (size_t b = 0; b < backends.size(); ++b) {
    const Totals& t = totals[b];
    std::printf("%s: %lld cases, %lld failed; outputs: %lld bit for bit, %lld within the tolerance (%lld of these "
                "not bit-equal); %lld cases equal only with contiguous operands, %lld ill-conditioned (outputs no "
                "reference pins down left out, or equal on ordinary inputs), %lld failed alike in every run; plans: %lld kernels, %lld op steps, %lld "
                "interpreted groups; time: compile %.1f s, waiting for kernels %.1f s, runs %.1f s\n",
                fuzz::compile_backend_name(backends[b]), static_cast<long long>(t.cases),
                static_cast<long long>(t.failed), static_cast<long long>(t.exact), static_cast<long long>(t.tolerant),
                static_cast<long long>(t.rounded), static_cast<long long>(t.layout),
                static_cast<long long>(t.ill_conditioned), static_cast<long long>(t.runtime_errors),
                static_cast<long long>(t.kernels), static_cast<long long>(t.op_steps),
                static_cast<long long>(t.interpreted), t.compile_ms / 1e3, t.wait_ms / 1e3, t.run_ms / 1e3);
    if (args.second_batch > 0) {
      std::printf("%s second batch: %lld cases replayed at two more sizes (batch, last dim or both), %lld of "
                  "them on dynamic shapes (the rest specialized), %lld failed\n",
                  fuzz::compile_backend_name(backends[b]), static_cast<long long>(t.second),
                  static_cast<long long>(t.second_dynamic), static_cast<long long>(t.second_failed));
    }
    if (args.gradients > 0) {
      std::printf("%s gradients: %lld cases split into forward and backward (%lld values saved, %lld nodes "
                  "recomputed in all), %lld failed\n",
                  fuzz::compile_backend_name(backends[b]), static_cast<long long>(t.gradients),
                  static_cast<long long>(t.saved), static_cast<long long>(t.recomputed),
                  static_cast<long long>(t.gradients_failed));
    }
    if (backends[b] == fuzz::CompileBackend::Cpp) {
      const codegen::KernelCacheStats s = codegen::KernelCache::global().stats();
      std::printf("kernel cache: %lld compiled (%.1f s in the compiler, %lld failures), %lld disk hits, %lld "
                  "memory hits\n",
                  static_cast<long long>(s.misses), s.compile_seconds, static_cast<long long>(s.compile_failures),
                  static_cast<long long>(s.disk_hits), static_cast<long long>(s.memory_hits));
    }
  }
  std::printf("%lld passed, %lld failed\n", static_cast<long long>(args.cases - failed_cases),
              static_cast<long long>(failed_cases));
  if (failed_cases > 0) throw CLI::RuntimeError(std::to_string(failed_cases) + " of " + std::to_string(args.cases) + " fuzz cases failed (the FAIL lines above)", 1);
}

}  // namespace smelt::tools
