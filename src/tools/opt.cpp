// smelt opt: runs a pass pipeline over a text IR file and prints the optimized IR.
//
//   smelt opt model.ir                          default pipeline, result on stdout
//   smelt opt model.ir --passes=cse,dce --stats per-pass statistics on stderr
//   smelt opt model.ir --print-ir-after=fold    IR on stderr after each run of fold that changed it
//   smelt opt model.ir --dot model.svg          a picture of the result (.dot: the DOT text)
//   smelt opt model.ir --bisect                 which pass application changes the results
//   smelt opt model.ir --fuse --explain-fusion  then fusion (fusion/fuse.h); for every node left
//                                               unfused, why (on stderr), with the metrics
//   smelt opt model.onnx --print-ir-after-all   an ONNX model, imported for its declared shapes
//                                               (symbolic dims: --dim NAME=VALUE); constants of
//                                               more than --show-constants values print elided
//   smelt opt --list-passes
//
// Exit codes: 0 done, 1 bad input (unreadable file, parse error, unknown pass, ...), 2 --bisect
// found a pass application that changed the results.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fusion/fuse.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "passes/bisect.h"
#include "passes/pass_manager.h"
#include "smelt/onnx.h"
#include "tools/commands.h"
#include "tools/model_engine.h"
#include "tools/options.h"
#include "tools/read_text.h"

namespace smelt::tools {
namespace {

struct OptArgs {
  std::string file;
  std::string passes = passes::kDefaultPipeline;
  bool print_ir_after_all = false;
  std::string print_ir_after;
  bool stats = false;
  std::string dot;
  bool list_passes = false;
  bool bisect = false;
  uint64_t seed = 0;
  bool fuse = false;
  bool explain_fusion = false;
  int fuse_max_ops = -1;  // -1: SMELT_FUSE_MAX_OPS or the default
  int fuse_max_depth = -1;
  int fuse_max_recompute = -1;
  std::vector<std::string> dims;          // .onnx: NAME=VALUE for symbolic dims
  int64_t show_constants = -1;            // -1: all for .ir files, 16 for .onnx
};

bool is_onnx(const std::string& file) {
  return file.size() >= 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
}

std::unique_ptr<ir::Graph> read_graph(const std::string& file, const std::vector<std::string>& dims) {
  if (is_onnx(file)) {
    onnx::ImportOptions options;
    options.dims = parse_dims(dims, "opt");
    return onnx::import_model(file, options).graph.ir_graph().clone();
  }
  SMELT_CHECK(dims.empty()) << "opt: --dim applies to .onnx models only";
  std::string text = read_text(file, "opt");
  try {
    return ir::parse(text);
  } catch (const Error& e) {
    SMELT_CHECK(false) << file << ": " << e.what();
  }
  return nullptr;
}

void list_passes() {
  for (const passes::PassInfo& p : passes::pass_registry()) std::printf("%-14s %s\n", p.name, p.description);
  std::printf("default pipeline: %s\n", passes::kDefaultPipeline);
}

int run_bisect(const ir::Graph& graph, const OptArgs& args) {
  passes::BisectOptions options;
  options.seed = args.seed;
  options.disabled = passes::options_from_env().disabled;
  passes::BisectResult r = passes::bisect(graph, passes::parse_pipeline(args.passes), options);
  if (!r.found) {
    std::printf("bisect: no pass application changed the results (%d applications of \"%s\")\n",
                r.applications, args.passes.c_str());
    return 0;
  }
  std::printf("bisect: pass '%s' (iteration %d, application %d) changed the results: %s\n",
              r.pass.c_str(), r.iteration, r.application, r.reason.c_str());
  std::printf("// IR before %s\n%s", r.pass.c_str(), r.ir_before.c_str());
  if (!r.ir_after.empty()) std::printf("// IR after %s\n%s", r.pass.c_str(), r.ir_after.c_str());
  return 2;
}

void run_opt(const OptArgs& args) {
  if (args.list_passes) {
    list_passes();
    return;
  }
  SMELT_CHECK(!args.file.empty()) << "opt: give an IR file to optimize (or - for stdin, or --list-passes)";
  passes::parse_pipeline(args.passes);  // unknown pass names fail before any work
  SMELT_CHECK(args.print_ir_after.empty() || passes::find_pass(args.print_ir_after))
      << "opt: --print-ir-after names an unknown pass '" << args.print_ir_after
      << "' (see smelt opt --list-passes)";
  if (!args.dot.empty()) {
    std::string ext = std::filesystem::path(args.dot).extension().string();
    SMELT_CHECK(ext == ".dot" || ext == ".svg" || ext == ".png" || ext == ".pdf")
        << "opt: --dot " << args.dot << ": the extension must be .dot, .svg, .png or .pdf";
    SMELT_CHECK(ext == ".dot" || ir::graphviz_available())
        << "opt: --dot " << args.dot << " needs Graphviz's 'dot' program, which is not installed "
        << "(apt-get install graphviz); write the DOT text instead with --dot " 
        << std::filesystem::path(args.dot).replace_extension(".dot").string();
  }
  auto graph = read_graph(args.file, args.dims);
  const ir::PrintOptions print_options{
      args.show_constants >= 0 ? size_t(args.show_constants) : is_onnx(args.file) ? size_t(16) : SIZE_MAX};
  if (args.bisect) {
    std::fflush(stdout);
    std::exit(run_bisect(*graph, args));
  }
  passes::PassOptions options = passes::options_from_env();
  options.log = &std::cerr;
  options.print_max_constant_elements = print_options.max_constant_elements;
  if (args.print_ir_after_all) options.print_ir_after = "all";
  else if (!args.print_ir_after.empty()) options.print_ir_after = args.print_ir_after;
  passes::PipelineResult result = passes::run_pipeline(*graph, args.passes, options);
  SMELT_CHECK(args.fuse || !args.explain_fusion) << "opt: --explain-fusion needs --fuse";
  fusion::FusionReport fusion_report;
  if (args.fuse) {
    fusion::FusionOptions fopt = fusion::fusion_options_from_env();
    if (args.fuse_max_ops >= 0) fopt.max_ops = fopt.max_pointwise_ops = args.fuse_max_ops;
    if (args.fuse_max_depth >= 0) fopt.max_depth = fopt.max_pointwise_depth = args.fuse_max_depth;
    if (args.fuse_max_recompute >= 0) fopt.max_recompute_ops = args.fuse_max_recompute;
    fusion_report = fusion::fuse(*graph, fopt);
  }
  std::cout << ir::print(*graph, print_options) << std::flush;
  if (args.stats) std::cerr << result.report();
  if (args.explain_fusion) std::cerr << fusion_report.explain();
  else if (args.fuse && args.stats) std::cerr << fusion_report.summary() << "\n";
  if (!args.dot.empty()) ir::write_dot(ir::to_dot(*graph, args.file), args.dot);
}

}  // namespace

void register_opt(CLI::App& app) {
  auto args = std::make_shared<OptArgs>();
  CLI::App* cmd = app.add_subcommand("opt", "Run a pass pipeline over a text IR file and print the result");
  cmd->add_option("file", args->file, "text IR file (- reads stdin), or an ONNX model (.onnx)");
  cmd->add_option("--dim", args->dims, "NAME=VALUE for a symbolic dim of an .onnx model's inputs");
  cmd->add_option("--show-constants", args->show_constants,
                  "print constants of at most N values, elide larger ones (default: all for .ir, 16 for .onnx)")
      ->check(integer_in<int64_t>(0, INT64_MAX));
  cmd->add_option("--passes", args->passes, "comma-separated pass pipeline, run to a fixed point")
      ->capture_default_str();
  cmd->add_flag("--print-ir-after-all", args->print_ir_after_all, "print the IR on stderr after every pass that changed it");
  cmd->add_option("--print-ir-after", args->print_ir_after, "print the IR on stderr after PASS when it changed it");
  cmd->add_flag("--stats", args->stats, "print per-pass statistics on stderr");
  cmd->add_option("--dot", args->dot, "also draw the result: a .dot file, or .svg/.png/.pdf via Graphviz");
  cmd->add_flag("--list-passes", args->list_passes, "list the registered passes and exit");
  cmd->add_flag("--bisect", args->bisect,
                "find the first pass application that changes the results on random inputs (exit 2 if one does)");
  cmd->add_option("--seed", args->seed, "seed of --bisect's random inputs")
      ->check(any_uint64())
      ->capture_default_str();
  cmd->add_flag("--fuse", args->fuse, "after the pipeline, fuse nodes into group nodes (fusion/fuse.h)");
  cmd->add_flag("--explain-fusion", args->explain_fusion,
                "with --fuse: print the groups, why each unfused node stayed out, and the metrics (stderr)");
  const fusion::FusionOptions defaults;
  cmd->add_option("--fuse-max-ops", args->fuse_max_ops,
                  "ops per fusion group at most, views not counted (default " + std::to_string(defaults.max_ops) +
                      " and " + std::to_string(defaults.max_pointwise_ops) +
                      " for pointwise groups, or SMELT_FUSE_MAX_OPS and SMELT_FUSE_MAX_POINTWISE_OPS)")
      ->check(integer_in(1, 1000));
  cmd->add_option("--fuse-max-depth", args->fuse_max_depth,
                  "longest chain of ops in a fusion group (default " + std::to_string(defaults.max_depth) + " and " +
                      std::to_string(defaults.max_pointwise_depth) +
                      " for pointwise groups, or SMELT_FUSE_MAX_DEPTH and SMELT_FUSE_MAX_POINTWISE_DEPTH)")
      ->check(integer_in(1, 1000));
  cmd->add_option("--fuse-max-recompute", args->fuse_max_recompute,
                  "recomputed ops per fusion group at most (default " + std::to_string(defaults.max_recompute_ops) +
                      ", or SMELT_FUSE_MAX_RECOMPUTE)")
      ->check(integer_in(0, 1000));
  cmd->callback([args] { run_opt(*args); });
}

}  // namespace smelt::tools
