// smelt check: runs ONNX conformance cases (the backend-test layout) and compares the outputs.
//
//   smelt check tests/onnx/node tests/onnx/simple     every case under these directories
//   smelt check tests/onnx/node/test_relu             one case
//   smelt check --export-roundtrip tests/onnx/node    import, export, import again, then run
//   smelt check tests/models/small --compile          through the compiled plan
//                                                     (--optimize: passes, then the interpreter)
//
// A case is a directory holding model.onnx and test_data_set_*/{input,output}_K.pb. Each data set
// imports the model for its input shapes, runs it, and compares every output: float outputs
// within |got - want| <= atol + rtol |want| (NaN only against NaN), integer and bool outputs
// exactly, dtypes and shapes equal. One line per case — PASS, FAIL with the first difference, or
// SKIP naming the op, attribute or dtype outside the supported set — and a closing line
// `N passed, M failed, K skipped`. Exit code 1 when any case failed.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "smelt/onnx.h"
#include "tools/commands.h"
#include "tools/model_engine.h"

namespace smelt::tools {
namespace {

namespace fs = std::filesystem;

struct CheckArgs {
  std::vector<std::string> dirs;
  double rtol = 1e-3, atol = 1e-4;
  EngineOptions engine;
  bool quiet = false;
  bool export_roundtrip = false;
  std::string export_dir;
};

enum class Outcome { Pass, Fail, Skip };

std::vector<fs::path> sorted_entries(const fs::path& dir, const std::string& prefix, bool dirs) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && (dirs ? e.is_directory() : e.is_regular_file())) out.push_back(e.path());
  }
  // input_10 after input_9: by the number after the prefix.
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) { return std::atoll(p.filename().string().c_str() + prefix.size()); };
    return num(a) < num(b);
  });
  return out;
}

// Empty when equal; otherwise what differs.
std::string compare(const Tensor& got, const Tensor& want, const CheckArgs& args) {
  std::ostringstream why;
  if (got.dtype() != want.dtype()) {
    why << "dtype " << dtype_name(got.dtype()) << ", expected " << dtype_name(want.dtype());
    return why.str();
  }
  if (got.shape() != want.shape()) {
    why << "shape " << shape_str(got.shape()) << ", expected " << shape_str(want.shape());
    return why.str();
  }
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  const bool floating = dtype_is_floating(want.dtype());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (!floating) ok = a[i] == b[i];
    else if (std::isnan(b[i]) || std::isnan(a[i])) ok = std::isnan(a[i]) && std::isnan(b[i]);
    else if (std::isinf(b[i]) || std::isinf(a[i])) ok = a[i] == b[i];
    else ok = std::fabs(a[i] - b[i]) <= args.atol + args.rtol * std::fabs(b[i]);
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  why << bad << " of " << a.size() << " elements differ; first at flat index " << first << ": got " << a[first]
      << ", expected " << b[first];
  return why.str();
}

// Imports the model; where a node needs the values of a graph input (a Reshape whose shape is an
// input), imports again with that input bound to this data set's value: the graph is specialized
// to it, as it would be for any caller that fixes the shape.
onnx::Model import_specialized(const std::string& model, onnx::ImportOptions options, const onnx::ModelInfo& info,
                               const std::vector<Tensor>& inputs, std::vector<std::string>* bound) {
  for (;;) {
    try {
      return onnx::import_model(model, options);
    } catch (const onnx::ValueDependent& e) {
      size_t i = 0;
      while (i < info.inputs.size() && info.inputs[i].name != e.value_name()) ++i;
      if (i == info.inputs.size() || options.input_values.count(e.value_name())) {
        // Computed from inputs: bind the non-float inputs (shapes, axes, counts, flags) once.
        bool added = false;
        for (size_t k = 0; k < info.inputs.size(); ++k) {
          if (!dtype_is_floating(inputs[k].dtype()) && !options.input_values.count(info.inputs[k].name)) {
            options.input_values[info.inputs[k].name] = inputs[k];
            bound->push_back(info.inputs[k].name);
            added = true;
          }
        }
        if (!added) throw;
        continue;
      }
      options.input_values[e.value_name()] = inputs[i];
      bound->push_back(e.value_name());
    }
  }
}

// The imported graph exported again and imported back: what a user of `smelt export` gets.
// Inputs keep their names and shapes; inputs bound at import are constants in the export.
onnx::Model export_roundtrip(const onnx::Model& m, const fs::path& dir, const CheckArgs& args) {
  onnx::ExportOptions o;
  o.input_names = m.input_names;
  o.output_names = m.output_names;
  onnx::Model back = [&] {
    if (args.export_dir.empty()) return onnx::import_model_bytes(onnx::save_bytes(m.graph, o));
    const fs::path out = fs::path(args.export_dir) / dir.filename();
    fs::create_directories(out);
    onnx::save(m.graph, (out / "model.onnx").string(), o);
    return onnx::import_model((out / "model.onnx").string());
  }();
  SMELT_CHECK(back.input_names == m.input_names && back.output_names == m.output_names)
      << "export round trip: the re-imported model's inputs or outputs have other names";
  return back;
}

Outcome check_case(const fs::path& dir, const CheckArgs& args, std::string* detail) {
  std::vector<std::string> specialized;
  const std::string model = (dir / "model.onnx").string();
  std::vector<fs::path> sets = sorted_entries(dir, "test_data_set_", true);
  if (sets.empty()) {
    *detail = "no test_data_set_* directory";
    return Outcome::Fail;
  }
  try {
    const onnx::ModelInfo info = onnx::inspect(model);
    for (const auto* list : {&info.inputs, &info.outputs}) {
      for (const onnx::ValueInfo& v : *list) {
        for (const char* kind : {"sequence", "optional", "map", "unknown"}) {
          if (v.dtype == kind) throw onnx::Unsupported("'" + v.name + "' is a " + kind + ", not a tensor");
        }
      }
    }
    for (const fs::path& set : sets) {
      std::vector<Tensor> inputs, expected;
      std::vector<fs::path> in_files = sorted_entries(set, "input_", false);
      std::vector<fs::path> out_files = sorted_entries(set, "output_", false);
      for (const auto& f : in_files) inputs.push_back(onnx::read_tensor_file(f.string()));
      for (const auto& f : out_files) expected.push_back(onnx::read_tensor_file(f.string()));
      SMELT_CHECK(inputs.size() == info.inputs.size())
          << set.filename().string() << " has " << inputs.size() << " inputs, the model " << info.inputs.size();
      onnx::ImportOptions options;
      for (size_t i = 0; i < inputs.size(); ++i) {
        options.input_shapes[info.inputs[i].name] = std::vector<int64_t>(inputs[i].shape().begin(), inputs[i].shape().end());
      }
      onnx::Model m = import_specialized(model, options, info, inputs, &specialized);
      if (args.export_roundtrip) m = export_roundtrip(m, dir, args);
      ModelEngine engine(std::move(m.graph), args.engine);
      std::vector<Tensor> run_inputs;
      for (const std::string& name : m.input_names) {
        for (size_t i = 0; i < info.inputs.size(); ++i) {
          if (info.inputs[i].name == name) run_inputs.push_back(inputs[i]);
        }
      }
      std::vector<Tensor> got = engine.run(run_inputs);
      SMELT_CHECK(got.size() == expected.size())
          << "the model gives " << got.size() << " outputs, " << set.filename().string() << " expects " << expected.size();
      for (size_t k = 0; k < got.size(); ++k) {
        const std::string why = compare(got[k], expected[k], args);
        if (!why.empty()) {
          *detail = set.filename().string() + " output " + std::to_string(k) + " ('" + m.output_names[k] + "'): " + why;
          return Outcome::Fail;
        }
      }
    }
  } catch (const onnx::Unsupported& e) {
    *detail = e.what();
    return Outcome::Skip;
  } catch (const Error& e) {
    *detail = std::string(e.internal() ? "internal error: " : "error: ") + e.what();
    return Outcome::Fail;
  } catch (const std::exception& e) {
    *detail = std::string("exception: ") + e.what();
    return Outcome::Fail;
  }
  if (!specialized.empty()) {
    std::sort(specialized.begin(), specialized.end());
    specialized.erase(std::unique(specialized.begin(), specialized.end()), specialized.end());
    *detail = "specialized to the values of input";
    for (const auto& s : specialized) *detail += " '" + s + "'";
  }
  return Outcome::Pass;
}

int run_check(const CheckArgs& args) {
  std::vector<fs::path> cases;
  for (const std::string& d : args.dirs) {
    const fs::path p(d);
    SMELT_CHECK(fs::is_directory(p)) << "check: '" << d << "' is not a directory";
    if (fs::exists(p / "model.onnx")) {
      cases.push_back(p);
      continue;
    }
    std::vector<fs::path> sub;
    for (const auto& e : fs::directory_iterator(p)) {
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) sub.push_back(e.path());
    }
    SMELT_CHECK(!sub.empty()) << "check: '" << d << "' holds no model.onnx, nor directories with one";
    std::sort(sub.begin(), sub.end());
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  int passed = 0, failed = 0, skipped = 0;
  for (const fs::path& c : cases) {
    std::string detail;
    const Outcome o = check_case(c, args, &detail);
    const std::string name = c.filename().string();
    if (o == Outcome::Pass) {
      ++passed;
      if (!args.quiet) std::printf("PASS %s%s%s\n", name.c_str(), detail.empty() ? "" : " (", detail.empty() ? "" : (detail + ")").c_str());
    } else if (o == Outcome::Fail) {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), detail.c_str());
    } else {
      ++skipped;
      if (!args.quiet) std::printf("SKIP %s: %s\n", name.c_str(), detail.c_str());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

}  // namespace

void register_check(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "run ONNX conformance cases (model.onnx + test_data_set_*) and compare");
  cmd->add_option("dirs", args->dirs, "case directories, or directories of cases")->required();
  cmd->add_option("--rtol", args->rtol, "relative tolerance for float outputs (default 1e-3)");
  cmd->add_option("--atol", args->atol, "absolute tolerance for float outputs (default 1e-4)");
  add_engine_options(cmd, &args->engine);
  cmd->add_flag("--quiet", args->quiet, "print only failures and the closing line");
  cmd->add_flag("--export-roundtrip", args->export_roundtrip,
                "export each imported graph to ONNX and import that back before running it");
  cmd->add_option("--export-dir", args->export_dir,
                  "with --export-roundtrip: keep each exported model as DIR/<case>/model.onnx");
  cmd->callback([args] {
    const int status = run_check(*args);
    if (status != 0) {
      std::fflush(stdout);
      std::exit(status);
    }
  });
}

}  // namespace smelt::tools
