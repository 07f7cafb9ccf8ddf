// ONNX export: every exportable op of the op table round-trips (trace -> export -> import -> run)
// to the traced graph's outputs on random inputs, bit for bit where export and import map the op
// to itself; traced models (an MLP, a small CNN, a transformer block) likewise. Each case is also
// written in the backend-test layout under $SMELT_EXPORT_CASES_DIR (when set), where
// tests/onnx/export_check.py runs onnx.checker over it and export_ort.js ONNX Runtime.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "export_cases.h"
#include "support/errors.h"
#include "support/temp_dir.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "smelt/onnx.h"
#include "smelt/quantize.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

// Raw little-endian bytes and a manifest line, so that the ORT script needs no protobuf reader.
void write_raw(const fs::path& dir, const std::string& stem, const Tensor& t, std::string& manifest) {
  const Tensor c = t.contiguous();
  std::ofstream f(dir / (stem + ".bin"), std::ios::binary);
  f.write(static_cast<const char*>(c.raw_data()), std::streamsize(c.numel() * int64_t(dtype_size(c.dtype()))));
  manifest += "{\"file\": \"" + stem + ".bin\", \"dtype\": \"" + dtype_name(c.dtype()) + "\", \"shape\": [";
  for (size_t i = 0; i < c.shape().size(); ++i) manifest += (i ? ", " : "") + std::to_string(c.shape()[i]);
  manifest += "]}";
}

void write_case_dir(const std::string& name, const std::string& model, const onnx::Model& back,
                    const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  const char* root = std::getenv("SMELT_EXPORT_CASES_DIR");
  if (!root || !*root) return;
  const fs::path dir = fs::path(root) / name, data = dir / "test_data_set_0";
  fs::create_directories(data);
  fs::copy_file(model, dir / "model.onnx", fs::copy_options::overwrite_existing);
  std::string manifest = "{\"inputs\": [";
  for (size_t i = 0; i < inputs.size(); ++i) {
    onnx::write_tensor_file((data / ("input_" + std::to_string(i) + ".pb")).string(), inputs[i], back.input_names[i]);
    if (i) manifest += ", ";
    manifest += "{\"name\": \"" + back.input_names[i] + "\", \"tensor\": ";
    write_raw(dir, "input_" + std::to_string(i), inputs[i], manifest);
    manifest += "}";
  }
  manifest += "], \"outputs\": [";
  for (size_t k = 0; k < outputs.size(); ++k) {
    onnx::write_tensor_file((data / ("output_" + std::to_string(k) + ".pb")).string(), outputs[k], back.output_names[k]);
    if (k) manifest += ", ";
    manifest += "{\"name\": \"" + back.output_names[k] + "\", \"tensor\": ";
    write_raw(dir, "output_" + std::to_string(k), outputs[k], manifest);
    manifest += "}";
  }
  std::ofstream(dir / "io.json") << manifest << "]}\n";
}

// Empty when equal (bit for bit when `exact`, else within rtol 1e-5 / atol 1e-6); else the first difference.
std::string compare(const Tensor& got, const Tensor& want, bool exact) {
  if (got.dtype() != want.dtype()) return std::string("dtype ") + dtype_name(got.dtype()) + " vs " + dtype_name(want.dtype());
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
  const Tensor a = got.contiguous(), b = want.contiguous();
  if (exact || !dtype_is_floating(want.dtype())) {
    if (std::memcmp(a.raw_data(), b.raw_data(), size_t(a.numel()) * dtype_size(a.dtype())) == 0) return "";
  }
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    const bool same = std::isnan(x[i]) ? std::isnan(y[i])
                      : exact || !dtype_is_floating(want.dtype()) ? x[i] == y[i]
                                                                  : std::fabs(x[i] - y[i]) <= 1e-6 + 1e-5 * std::fabs(y[i]);
    if (!same) return "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " + std::to_string(y[i]);
  }
  return exact ? "bits differ (-0 vs 0 or NaN payloads)" : "";
}

class OnnxExport : public testing::TempDirTest {};

// Each case: trace, export with the params as initializers, check the opset's form, import back
// and run; the imported model's outputs must match the traced graph's.
TEST_F(OnnxExport, EveryCaseRoundTrips) {
  const std::vector<export_cases::Case> cases = export_cases::all();
  ASSERT_GT(cases.size(), 60u);
  for (const export_cases::Case& c : cases) {
    SCOPED_TRACE(c.name);
    Graph g = Graph::trace(c.fn, c.inputs, c.params);
    std::vector<Tensor> all = c.inputs;
    all.insert(all.end(), c.params.begin(), c.params.end());
    const std::vector<Tensor> want = g.run(all);
    onnx::ExportOptions options;
    options.params = c.params;
    options.opset = c.opset;
    options.quantized_as_qdq = c.qdq;
    const std::string file = path(c.name + ".onnx");
    ASSERT_NO_THROW(onnx::save(g, file, options));
    onnx::Model back = onnx::import_model(file);
    ASSERT_EQ(back.input_names.size(), c.inputs.size());
    if (c.qdq || c.name == "qlinear_matmul_bias") back.graph.optimize();  // folded to the integer ops again
    const std::vector<Tensor> got = back.graph.run(c.inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(compare(got[k], want[k], c.exact), "") << "output " << k;
    write_case_dir(c.name, file, back, c.inputs, want);
  }
}

// Every op of the op table is exported by some case, or refused with a message (the table's
// ONNX column has no gaps).
// The node types of a model's graph, in order.
std::vector<std::string> node_types(const std::string& bytes) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  std::vector<std::string> types;
  for (const auto& n : m.graph().node()) types.push_back(n.op_type());
  return types;
}

// The integer products as QOperator nodes by default, as the QDQ pattern when asked (and a
// qlinear_matmul with a bias always: QLinearMatMul has none).
TEST_F(OnnxExport, IntegerProductsInTheQOperatorOrTheQdqForm) {
  const Tensor s = full({}, 0.05, DType::Float32), zu = full({}, 3.0, DType::UInt8);
  const Tensor sc = from_vector(std::vector<float>{0.02f, 0.03f}, {2}), zc = zeros({2}, DType::Int8);
  const Tensor k = cast(from_vector(std::vector<int64_t>{1, -2, 3, 4, -5, 6, 7, 8, -9, 10, 11, 12,
                                                         13, 14, -15, 16, 17, 18},
                                    {2, 1, 3, 3}),
                        DType::Int8);
  const Tensor w = cast(from_vector(std::vector<int64_t>{1, -2, 3, 4, -5, 6}, {3, 2}), DType::Int8);
  const Tensor bias = cast(from_vector(std::vector<int64_t>{7, -7}, {2}), DType::Int32);
  Graph conv = Graph::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {qlinear_conv2d({in[0], s, zu}, {k, sc, zc}, s, zu, bias)};
  }, {full({1, 1, 4, 4}, 7.0, DType::UInt8)});
  Graph linear = Graph::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {qlinear_matmul({in[0], s, zu}, {w, sc, zc}, s, zu, bias)};
  }, {full({2, 3}, 9.0, DType::UInt8)});
  using V = std::vector<std::string>;
  EXPECT_EQ(node_types(onnx::save_bytes(conv)), V{"QLinearConv"});
  EXPECT_EQ(node_types(onnx::save_bytes(conv, {.quantized_as_qdq = true})),
            (V{"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv", "QuantizeLinear"}));
  const V linear_qdq{"DequantizeLinear", "DequantizeLinear", "MatMul", "DequantizeLinear", "Add", "QuantizeLinear"};
  EXPECT_EQ(node_types(onnx::save_bytes(linear)), linear_qdq);
  EXPECT_EQ(node_types(onnx::save_bytes(linear, {.quantized_as_qdq = true})), linear_qdq);
  // Imported and optimized, each is its integer op again, with the same bytes.
  for (Graph* g : {&conv, &linear}) {
    const Tensor x = g == &conv ? cast(from_vector(std::vector<int64_t>{0, 9, 255, 3, 40, 41, 42, 200, 1, 2, 3, 4,
                                                                        90, 91, 92, 93},
                                                   {1, 1, 4, 4}),
                                       DType::UInt8)
                                : cast(from_vector(std::vector<int64_t>{0, 255, 17, 3, 100, 250}, {2, 3}), DType::UInt8);
    onnx::Model back = onnx::import_model_bytes(onnx::save_bytes(*g, {.quantized_as_qdq = true}));
    back.graph.optimize();
    const std::vector<std::string> ops = back.graph.op_names();
    EXPECT_TRUE(std::find(ops.begin(), ops.end(), g == &conv ? "qlinear_conv2d" : "qlinear_matmul") != ops.end());
    EXPECT_EQ(back.graph.run({x})[0].to_vector(), g->run({x})[0].to_vector());
  }
}

TEST_F(OnnxExport, CasesCoverEveryExportableOp) {
  std::set<std::string> seen;
  for (const export_cases::Case& c : export_cases::all()) {
    for (const std::string& op : Graph::trace(c.fn, c.inputs, c.params).op_names()) seen.insert(op);
  }
  for (const std::string& op : export_cases::exportable_ops()) EXPECT_TRUE(seen.count(op)) << op << " has no case";
}

TEST_F(OnnxExport, OpsWithoutOnnxFormAreClearErrors) {
  Tensor x = randn({1, 2, 4, 4});
  Graph g = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{dropout(in[0], 0.5, true)};
  }, {x});
  expect_error([&] { onnx::save_bytes(g); }, {"onnx export: node %", "(dropout)", "training mode", "eval"});
  expect_error([&] { onnx::save_bytes(Graph::trace(export_cases::max_pool_grad, {x})); },
               {"(max_pool2d_grad)", "no ONNX form"});
  Graph ok = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{relu(in[0])};
  }, {x});
  expect_error([&] { onnx::save_bytes(ok, {.opset = 12}); }, {"opset 12", "valid: 13 to 18"});
  expect_error([&] { onnx::save_bytes(ok, {.opset = 19}); }, "opset 19");
  expect_error([&] { onnx::save_bytes(ok, {.params = {x, x}}); }, "2 param values given");
  expect_error([&] { onnx::save_bytes(ok, {.params = {randn({2})}}); }, {"param value 0", "(2,)", "(1, 2, 4, 4)"});
  expect_error([&] { onnx::save_bytes(ok, {.output_names = {"a", "b"}}); }, "2 output names");
  expect_error([&] { onnx::save_bytes(ok, {.input_names = {"y"}, .output_names = {"y"}}); }, "output name 'y'");
  // An integer index_add needs ScatterElements' reduction, new at opset 16 (a floating one is a
  // MatMul before it: export_cases).
  Graph ia = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{index_add(in[0], 0, tensor({2, 0, 2}), in[0])};
  }, {tensor({1, 2, 3})});
  expect_error([&] { onnx::save_bytes(ia, {.opset = 15}); }, {"(index_add)", "opset 16"});
  EXPECT_NO_THROW(onnx::save_bytes(ia, {.opset = 16}));
}

// Big initializers go to one file beside the model; the model imports from it.
TEST_F(OnnxExport, ExternalData) {
  Tensor x = randn({2, 64}), w = randn({64, 64}), b = randn({64});
  Graph g = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    return std::vector<Tensor>{matmul(in[0], p[0]) + p[1]};
  }, {x}, {w, b});
  const std::vector<Tensor> want = g.run({x, w, b});
  onnx::save(g, path("m.onnx"), {.params = {w, b}, .external_data = true});
  EXPECT_EQ(files(), (std::vector<std::string>{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(fs::file_size(path("m.onnx.data")), 64u * 64u * 4u);  // b (256 bytes) stays inline
  EXPECT_LT(fs::file_size(path("m.onnx")), 1024u);
  onnx::Model back = onnx::import_model(path("m.onnx"));
  EXPECT_EQ(compare(back.graph.run({x})[0], want[0], true), "");
  expect_error([&] { onnx::save_bytes(g, {.params = {w, b}, .external_data = true}); }, "external data needs a file");
}

// A failed export leaves an existing file as it was (the write is atomic).
TEST_F(OnnxExport, FailedExportKeepsTheOldFile) {
  std::ofstream(path("m.onnx")) << "old";
  Graph g = Graph::trace(export_cases::max_pool_grad, {randn({1, 1, 4, 4})});
  EXPECT_THROW(onnx::save(g, path("m.onnx")), Error);
  EXPECT_EQ(files(), std::vector<std::string>{"m.onnx"});
  EXPECT_EQ(fs::file_size(path("m.onnx")), 3u);
}

// Names: inputs keep their IR names (or given ones), outputs get given names; an output that is
// an input or repeats another goes through an Identity.
TEST_F(OnnxExport, NamesAndPassThroughOutputs) {
  Tensor x = randn({3}), y = randn({3});
  Graph g = Graph::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor s = in[0] + in[1];
    return std::vector<Tensor>{s, in[0], s};
  }, {x, y});
  onnx::Model back =
      onnx::import_model_bytes(onnx::save_bytes(g, {.input_names = {"a", "b"}, .output_names = {"s", "x", "s2"}}));
  EXPECT_EQ(back.input_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(back.output_names, (std::vector<std::string>{"s", "x", "s2"}));
  const std::vector<Tensor> got = back.graph.run({x, y});
  EXPECT_EQ(compare(got[0], x + y, true), "");
  EXPECT_EQ(compare(got[1], x, true), "");
  EXPECT_EQ(compare(got[2], x + y, true), "");
}

// A module: parameters and buffers become initializers named as in its state dict.
TEST_F(OnnxExport, ModuleKeepsStateDictNames) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Conv2d>(3, 4, 3, nn::Conv2d::Options{.padding = {1, 1}}));
  model->push_back(std::make_shared<nn::BatchNorm2d>(4));
  model->push_back(std::make_shared<nn::ReLU>());
  model->eval();
  Tensor x = randn({2, 3, 8, 8});
  const Tensor want = (*model)(x);
  onnx::save_module(*model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*model)(in[0])}; }, {x},
                    path("m.onnx"), {.input_names = {"image"}});
  onnx::ImportOptions as_params;
  as_params.initializers_as_params = true;
  onnx::Model back = onnx::import_model(path("m.onnx"), as_params);
  EXPECT_EQ(back.input_names, std::vector<std::string>{"image"});
  for (const char* name : {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"}) {
    EXPECT_NE(std::find(back.param_names.begin(), back.param_names.end(), name), back.param_names.end()) << name;
  }
  std::vector<Tensor> in{x};
  in.insert(in.end(), back.params.begin(), back.params.end());
  EXPECT_EQ(compare(back.graph.run(in)[0], want, false), "");
}

// Found in review: a tensor the forward captures beside the module's state (a scale held outside
// it) shifted every initializer binding by one: the model read the scale's values as a weight.
TEST_F(OnnxExport, AModuleForwardCapturingATensorExportsItAsAnInitializer) {
  auto linear = std::make_shared<nn::Linear>(3, 3);
  const Tensor scale = full({3}, 2.0);
  const Tensor x = randn({2, 3});
  const auto forward = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*linear)(in[0]) * scale}; };
  const Tensor want = forward({x})[0];
  onnx::save_module(*linear, forward, {x}, path("captured.onnx"), {});
  onnx::Model back = onnx::import_model(path("captured.onnx"));
  EXPECT_EQ(back.input_names.size(), 1u);
  EXPECT_EQ(compare(back.graph.run({x})[0], want, false), "");
}

}  // namespace
}  // namespace smelt
