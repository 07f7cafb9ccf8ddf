// The real architectures of tests/models/small (make_models.py) through the compile pipeline: the
// compiled plan (passes with batch-norm folding, fusion, memory plan, fused kernels, replay) gives
// the interpreter's outputs on the unoptimized graph, on the data set's input and on a second,
// random one; replaying the plan gives the same bits as its first run, also when the arena holds
// garbage before the run (no step may read arena memory that no earlier step wrote).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;

const fs::path kModels = fs::path(SMELT_TEST_DIR) / "models" / "small";

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kModels)) {
    if (fs::exists(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Folding batch norms into conv weights and fusing reassociate float32 sums, so compiled and
// interpreted differ by rounding, growing with depth: each element within 1e-4 of the output's
// largest magnitude (plus 1e-4 relative). A wrong fold, a missed epilogue or an overlapping
// arena buffer changes outputs by far more.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 1e-3) << what << ": outputs this small would make the comparison meaningless";
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    worst = std::max(worst, d);
    if (!(d <= 1e-4 * scale + 1e-4 * std::fabs(b[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << a.size() << " elements differ; max |difference| " << worst
                     << ", largest |output| " << scale;
}

void expect_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << what << ": element " << i << ": " << a[i] << " vs " << b[i];
  }
}

class CompiledModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CompiledModel, MatchesTheInterpreter) {
  const fs::path dir = kModels / GetParam();
  const Tensor given = onnx::read_tensor_file((dir / "test_data_set_0" / "input_0.pb").string());
  // Text models declare (batch, sequence) symbolic: they take the data set's shape.
  onnx::ImportOptions import;
  import.input_shapes["input"] = given.shape();
  onnx::Model m = onnx::import_model((dir / "model.onnx").string(), import);
  Generator gen(7);
  // Token ids: random ones below the largest the data set uses (inside the vocabulary).
  const Tensor random = given.dtype() == DType::Int64
                            ? randint(0, smelt::amax(given).item<int64_t>() + 1, given.shape(), &gen)
                            : randn(given.shape(), DType::Float32, &gen);

  runtime::PipelineOptions options;
  options.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph c = runtime::compile_graph(m.graph.ir_graph().clone(), options);
  // The pipeline did its work: batch norms folded, groups fused, intermediates in one arena.
  EXPECT_LT(c.nodes_after, c.nodes_before);
  EXPECT_GT(c.plan->stats().kernels + c.plan->stats().op_steps, 0);
  EXPECT_EQ(c.plan->stats().interpreted, 0) << c.plan->describe();
  EXPECT_LT(c.plan->stats().arena_bytes, c.plan->stats().naive_bytes);

  for (const Tensor& x : {given, random}) {
    const std::vector<Tensor> want = m.graph.run({x});
    c.plan->fill_arena(0xff);  // NaN in every float: a read of unwritten arena memory shows
    const std::vector<Tensor> got = c.plan->run({x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], GetParam() + " output " + std::to_string(k));
    const std::vector<Tensor> again = c.plan->run({x});
    for (size_t k = 0; k < got.size(); ++k) expect_bits(again[k], got[k], GetParam() + " replay");
  }
}

INSTANTIATE_TEST_SUITE_P(Small, CompiledModel, ::testing::ValuesIn(model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(CompiledModels, AllArchitecturesArePresent) {
  // make_models.py writes these; a missing one would silently shrink the suite above.
  const std::vector<std::string> names = model_names();
  for (const char* prefix : {"resnet18", "mobilenetv2", "squeezenet1_1", "transformer_encoder",
                             "lstm_tagger", "gru_classifier", "mobilenetv3_small", "convnext",
                             "densenet", "shufflenetv2", "unet", "vit"}) {
    EXPECT_TRUE(std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; }))
        << prefix;
  }
}

}  // namespace
}  // namespace smelt
