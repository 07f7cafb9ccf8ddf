// ONNX import: a model file becomes a smelt::Graph that runs, prints and optimizes like a traced
// one.
//
//   smelt::onnx::ModelInfo info = smelt::onnx::inspect("model.onnx");  // inputs, opsets, dims
//   smelt::onnx::Model m = smelt::onnx::import_model("model.onnx", {.dims = {{"batch", 8}}});
//   std::vector<smelt::Tensor> y = m.graph.run({x});                  // in m.input_names order
//
// Graphs have static shapes, so a model is imported for one set of input shapes: a symbolic dim
// ("batch", or one without a name) takes its value from ImportOptions::dims or from the shapes
// given in ImportOptions::input_shapes. Initializers become constants (folded into whatever only
// they feed: a transposed weight, a shape computation), or graph parameters with
// `initializers_as_params`. Nodes whose inputs are all known at import time (Shape -> Gather ->
// Concat -> Reshape chains on fixed shapes) are computed then, so the graph holds no shape
// arithmetic.
//
// Anything outside the supported set (an op, an attribute value, a dtype) is an
// onnx::Unsupported error naming the node, op, opset and attribute; a malformed file is a
// smelt::Error. Neither crashes, whatever the bytes.
//
// ONNX export: a graph (traced, parsed from text, imported) becomes a model file that
// onnx.checker accepts and that ONNX Runtime and smelt's own importer run with the same results.
//
//   smelt::Graph g = smelt::Graph::trace(mlp, {x}, {w1, b1, w2, b2});
//   smelt::onnx::save(g, "mlp.onnx", {.params = {w1, b1, w2, b2}});   // weights as initializers
//   smelt::onnx::save_module(model, fn, {x}, "model.onnx");          // a module, names kept
//
// Each IR node becomes one ONNX node or a small fixed pattern (gelu, var, a gradient op); an op
// with no ONNX form (a random dropout, a pooling gradient) is a smelt::Error naming the node.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "smelt/error.h"
#include "smelt/graph.h"

namespace smelt {
namespace nn {
class Module;
}

namespace onnx {

// Something valid ONNX that smelt does not support (yet): an op, an attribute, a dtype.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& what) : Error(what) {}
};

// A node needs the values of `value_name` (a shape, axes, a count) that depend on graph inputs:
// smelt graphs have static shapes. Importing again with those inputs bound
// (ImportOptions::input_values) specializes the graph to their values.
class ValueDependent : public Unsupported {
 public:
  ValueDependent(const std::string& what, const std::string& value_name)
      : Unsupported(what), value_name_(value_name) {}
  const std::string& value_name() const { return value_name_; }

 private:
  std::string value_name_;
};

struct ImportOptions {
  // Values of symbolic dims, by their name in the model (dim_param).
  std::map<std::string, int64_t> dims;
  // Whole input shapes, by input name: they must agree with the model's fixed dims, and give the
  // symbolic ones (what `smelt run --input` and `smelt check` pass).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs bound to values: they become constants (not graph inputs), and the graph is
  // specialized to them (a Reshape whose shape is an input, an axes input).
  std::map<std::string, Tensor> input_values;
  // Initializers as graph parameters (inputs after the model's own, in Model::param_names order)
  // instead of constants.
  bool initializers_as_params = false;
};

// A graph input or output as the model declares it; dims of -1 are symbolic (dim_names says
// which name, empty when none).
struct ValueInfo {
  std::string name;
  std::string dtype;  // the ONNX name: "float32", "int64", "float16", ...
  std::vector<int64_t> dims;
  std::vector<std::string> dim_names;
  bool has_shape = false;  // false: the model gives no shape at all
};

struct ModelInfo {
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain ("" for ai.onnx) -> version
  std::string producer;
  std::vector<ValueInfo> inputs;  // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  size_t num_nodes = 0;
  size_t num_initializers = 0;
};

struct Model {
  Graph graph;
  std::vector<std::string> input_names;   // graph inputs, in order (bound ones left out)
  std::vector<std::string> param_names;   // with initializers_as_params: the parameters, in order
  std::vector<Tensor> params;             // their values
  std::vector<std::string> output_names;
};

// Reads the model's declarations (no import): what `smelt run` shows and what symbolic dims need.
ModelInfo inspect(const std::string& path);
Model import_model(const std::string& path, const ImportOptions& options = {});
// The same from bytes in memory (external data is refused: there is no directory to read from).
Model import_model_bytes(const std::string& bytes, const ImportOptions& options = {});

// A TensorProto file (the backend tests' input_0.pb) as a tensor; its name in *name when given.
Tensor read_tensor_file(const std::string& path, std::string* name = nullptr);
// A tensor as an ONNX TensorProto file, so that a run's outputs read back as test data.
void write_tensor_file(const std::string& path, const Tensor& t, const std::string& name);

struct ExportOptions {
  // The default opset (ai.onnx) the model imports: 13 to 18. Ops whose form changed (Reduce* axes
  // as inputs at 18, LayerNormalization at 17, ScatterElements' reduction at 16) follow it.
  int64_t opset = 17;
  // Values of the graph's last inputs (a traced graph's params): they become initializers named
  // after the inputs, and leave the model's inputs. Shapes and dtypes must match.
  std::vector<Tensor> params = {};
  // Names of the model's inputs (the graph inputs that stay inputs) and outputs; empty: the IR
  // names of inputs ("input_K" when none), "output_K" for outputs.
  std::vector<std::string> input_names = {};
  std::vector<std::string> output_names = {};
  // Initializers of at least external_data_min_bytes go to one file beside the model, named
  // "<model file name>.data" (models past protobuf's 2 GiB need it).
  bool external_data = false;
  int64_t external_data_min_bytes = 1024;
  std::string graph_name = "smelt";
  // Integer products (qlinear_conv2d, qlinear_matmul) in ONNX's QDQ form: DequantizeLinear of the
  // quantized input, weight and int32 bias, the float Conv / MatMul (+ Add), then QuantizeLinear,
  // as ONNX Runtime's quantize_static writes models and other tools read them (an engine runs the
  // pattern as one integer op; smelt's importer folds it back, passes/fold_qdq.h). false: the
  // QOperator form, QLinearConv / QLinearMatMul; a qlinear_matmul with a bias is QDQ in both
  // (QLinearMatMul has none).
  bool quantized_as_qdq = false;
};

// Writes the model atomically (a temporary file renamed over `path`; the data file first).
void save(const Graph& graph, const std::string& path, const ExportOptions& options = {});
// The serialized ModelProto (external_data is refused: there is no file to put it beside).
std::string save_bytes(const Graph& graph, const ExportOptions& options = {});

// Traces `fn` (which calls `module` on its inputs) as trace_module does and saves the graph with
// the module's parameters and buffers as initializers named as in its state dict ("0.weight").
// The module's mode decides what is traced: call eval() first for inference (dropout in training
// mode has no ONNX form). Extra outputs of training mode (updated running statistics) are left out.
void save_module(nn::Module& module, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                 const std::vector<Tensor>& example_inputs, const std::string& path,
                 const ExportOptions& options = {});

}  // namespace onnx
}  // namespace smelt
