// smelt export: a text IR file as an ONNX model.
//
//   smelt export model.ir -o model.onnx                       opset 17, params stay model inputs
//   smelt export model.ir -o model.onnx --params w.safetensors  trailing inputs named in the file
//                                                             become initializers
//   smelt export model.ir -o model.onnx --opset 13 --external-data
//
// Errors (an op with no ONNX form, a param whose shape differs) are one line naming the node or
// tensor, exit code 1; nothing is written then.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "ir/graph.h"
#include "smelt/graph.h"
#include "smelt/io.h"
#include "smelt/onnx.h"
#include "tools/commands.h"

namespace smelt::tools {
namespace {

struct ExportArgs {
  std::string file;
  std::string out;
  std::string params;
  int64_t opset = 17;
  bool external_data = false;
};

void run_export(const ExportArgs& args) {
  std::ifstream f(args.file);
  SMELT_CHECK(f.good()) << "export: cannot open '" << args.file << "'";
  std::stringstream text;
  text << f.rdbuf();
  const Graph g = Graph::parse(text.str());
  g.verify();
  onnx::ExportOptions options;
  options.opset = args.opset;
  options.external_data = args.external_data;
  if (!args.params.empty()) {
    StateDict values = io::load_safetensors(args.params);
    // The params are the graph's trailing inputs named in the file.
    const ir::Graph& ir = g.ir_graph();
    size_t first = ir.inputs().size();
    while (first > 0 && values.count(ir.inputs()[first - 1]->name)) --first;
    SMELT_CHECK(ir.inputs().size() - first == values.size())
        << "export: '" << args.params << "' holds " << values.size() << " tensors, but only the last "
        << ir.inputs().size() - first << " graph inputs are named in it (params must be the trailing inputs)";
    for (size_t i = first; i < ir.inputs().size(); ++i) options.params.push_back(values.at(ir.inputs()[i]->name));
  }
  onnx::save(g, args.out, options);
  std::printf("exported %zu nodes to %s (opset %lld, %zu initializers from params)\n", g.num_nodes(), args.out.c_str(),
              static_cast<long long>(args.opset), options.params.size());
}

}  // namespace

void register_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write a text IR graph as an ONNX model");
  cmd->add_option("file", args->file, "the IR file (smelt opt's text form)")->required();
  cmd->add_option("-o,--out", args->out, "the ONNX model to write")->required();
  cmd->add_option("--opset", args->opset, "the default opset to target (13 to 18, default 17)")->check(CLI::Range(13, 18));
  cmd->add_option("--params", args->params, "a safetensors file with the values of the trailing (param) inputs");
  cmd->add_flag("--external-data", args->external_data, "write initializers of 1 KiB and more to <out>.data");
  cmd->callback([args] { run_export(*args); });
}

}  // namespace smelt::tools
