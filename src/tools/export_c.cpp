// smelt export-c: a model as standalone C11 (docs/export_c.md).
//
//   smelt export-c model.onnx -o DIR                     DIR/model.c, DIR/model.h, weights embedded
//   smelt export-c model.onnx -o DIR --weights file      + DIR/model.weights, passed to model_run
//   smelt export-c graph.ir -o DIR --name net --target x86-64-v4
//   smelt export-c model.onnx -o DIR --dim batch=1       a value for each symbolic dim
//
// Errors (an op the export has no C for, a symbolic dim without a value) are one line, exit code 1;
// nothing is written then.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "export_c/export_c.h"
#include "smelt/graph.h"
#include "smelt/onnx.h"
#include "tools/commands.h"
#include "tools/model_engine.h"
#include "tools/output_dir.h"

namespace smelt::tools {
namespace {

struct ExportCArgs {
  std::string model;
  std::string out;
  std::string name = "model";
  std::string weights = "embed";
  std::string target = "generic";
  std::vector<std::string> dims;  // NAME=VALUE
  bool no_winograd = false;
};

Graph load(const ExportCArgs& args) {
  const bool ir = args.model.size() > 3 && args.model.compare(args.model.size() - 3, 3, ".ir") == 0;
  if (!ir) {
    onnx::ImportOptions options;
    options.dims = parse_dims(args.dims, "export-c");
    return std::move(onnx::import_model(args.model, options).graph);
  }
  std::ifstream f(args.model);
  SMELT_CHECK(f.good()) << "export-c: cannot open '" << args.model << "'";
  std::stringstream text;
  text << f.rdbuf();
  Graph g = Graph::parse(text.str());
  g.verify();
  return g;
}

void run_export_c(const ExportCArgs& args) {
  export_c::Options options;
  options.name = args.name;
  options.weights = args.weights == "file" ? export_c::Weights::File : export_c::Weights::Embed;
  options.target = export_c::target_from_name(args.target);
  options.winograd = !args.no_winograd;
  prepare_output_dir(args.out, "export-c: -o");
  const Graph g = load(args);
  const export_c::Exported e = export_c::export_graph(g.ir_graph(), options);
  for (const export_c::File& f : e.files) write_text_file(args.out + "/" + f.name, f.content);
  std::printf("%s", e.summary.c_str());
  for (const export_c::File& f : e.files) std::printf("wrote %s/%s (%zu bytes)\n", args.out.c_str(), f.name.c_str(), f.content.size());
}

}  // namespace

void register_export_c(CLI::App& app) {
  auto args = std::make_shared<ExportCArgs>();
  CLI::App* cmd = app.add_subcommand("export-c", "write a model as standalone C11 (model.c, model.h): no runtime, no malloc");
  cmd->add_option("model", args->model, "an ONNX model (.onnx) or a text IR graph (.ir)")->required();
  cmd->add_option("-o,--out", args->out, "the directory to write into")->required();
  cmd->add_option("--name", args->name, "file names and symbol prefix (default model)");
  cmd->add_option("--weights", args->weights, "embed: const arrays in model.c (default); file: model.weights")
      ->check(CLI::IsMember({"embed", "file"}));
  cmd->add_option("--target", args->target, "generic (default), x86-64-v3, x86-64-v4, aarch64: the GEMM tile size")
      ->check(CLI::IsMember({"generic", "x86-64-v3", "x86-64-v4", "aarch64"}));
  cmd->add_option("--dim", args->dims, "NAME=VALUE for a symbolic dim");
  cmd->add_flag("--no-winograd", args->no_winograd, "3x3 convolutions by im2col GEMM too (default: Winograd F(2x2, 3x3))");
  cmd->callback([args] { run_export_c(*args); });
}

}  // namespace smelt::tools
