// smelt against PyTorch: every case in tests/golden/ops/*.json (written by
// tests/golden/make_golden.py; the format is documented there) runs as its own test. A case
// calls one smelt function (golden_op_table.cpp), compares the outputs with PyTorch's, and
// compares the gradients of sum_k sum(outputs[k] * weights[k]) with respect to the inputs,
// computed with autograd::grad.
// (GoldenCoverage checks that the table and the data cover each other.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "golden_op_table.h"
#include "support/check.h"
#include "support/json_tensor.h"

namespace smelt::golden {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(SMELT_TEST_DIR) / "golden" / "ops"; }

struct GoldenCase {
  std::string family;  // the JSON file's stem
  std::shared_ptr<const json> data;
  std::string name() const { return data->at("name").get<std::string>(); }
  std::string op() const { return data->at("op").get<std::string>(); }
};

std::vector<GoldenCase> load_cases() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<GoldenCase> cases;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    json doc = json::parse(in);
    for (const json& c : doc.at("cases")) {
      cases.push_back({file.stem().string(), std::make_shared<const json>(c)});
    }
  }
  return cases;
}

const std::vector<GoldenCase>& all_cases() {
  static const std::vector<GoldenCase> cases = load_cases();
  return cases;
}

struct Tolerance {
  double rtol, atol;
};

// float32 results against the exact answer rounded to float32 (make_golden.py computes in
// float64). One tolerance for every op: PyTorch's own float32 kernels stay below 2% of this
// budget on every case (the worst are conv2d and matmul gradients, whose sums of up to 36
// products are the longest accumulations here), so a correct float32 kernel passes with a wide
// margin and a wrong formula does not.
constexpr Tolerance kFloatTolerance = {1e-4, 1e-5};

::testing::AssertionResult matches(const Tensor& got, const Tensor& expected, Tolerance tol) {
  if (!got.defined()) return ::testing::AssertionFailure() << "smelt returned no tensor";
  if (got.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << ", expected "
                                         << dtype_name(expected.dtype());
  }
  if (!dtype_is_floating(expected.dtype())) tol = {0.0, 0.0};  // integers and bools: exact
  return testing::all_close(got, expected, tol.rtol, tol.atol);
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.family << "/" << c.name(); }

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesPyTorch) {
  const json& c = *GetParam().data;
  const std::string op = GetParam().op();
  SCOPED_TRACE("golden case " + GetParam().family + "/" + GetParam().name() + " (op " + op + ")");
  auto entry = golden_op_table().find(op);
  ASSERT_NE(entry, golden_op_table().end()) << "no entry for op '" << op << "' in golden_op_table";
  const Tolerance tol = kFloatTolerance;

  std::vector<std::string> names;
  std::vector<Tensor> leaves, args, differentiable;
  for (const json& in : c.at("inputs")) {
    Tensor t = testing::tensor_from_json(in);
    if (in.at("requires_grad").get<bool>()) {
      t.set_requires_grad();
      differentiable.push_back(t);
    }
    names.push_back(in.at("name").get<std::string>());
    leaves.push_back(t);
    // "permute_first": the op sees a permuted (non-contiguous) view of x.
    args.push_back(names.back() == "x" && c.at("attrs").contains("permute_first")
                       ? permute(t, c.at("attrs").at("permute_first").get<Shape>())
                       : t);
  }

  std::vector<Tensor> outputs = entry->second(GoldenCall(c.at("attrs"), names, args));

  const json& expected_outputs = c.at("outputs");
  ASSERT_EQ(outputs.size(), expected_outputs.size()) << "number of outputs";
  Tensor loss;
  for (size_t k = 0; k < outputs.size(); ++k) {
    EXPECT_TRUE(matches(outputs[k], testing::tensor_from_json(expected_outputs[k]), tol)) << "output " << k;
    Tensor w = testing::tensor_from_json(c.at("weights")[k]);
    if (!w.defined()) continue;
    Tensor term = sum(outputs[k] * cast(w, outputs[k].dtype()));
    loss = loss.defined() ? loss + term : term;
  }
  if (differentiable.empty()) return;
  ASSERT_TRUE(loss.defined()) << "inputs require grad but no output has a weight";

  // An output that does not require grad (smelt marks sign kNoGrad, where PyTorch returns zero
  // gradients) gives no gradients at all: each then has to be zero in PyTorch too.
  std::vector<Tensor> grads(differentiable.size());
  if (loss.requires_grad()) grads = autograd::grad({loss}, differentiable, {}, false, false, true);
  size_t next = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const json& expected_grad = c.at("grads")[i];
    if (expected_grad.is_null()) continue;
    Tensor expected = testing::tensor_from_json(expected_grad);
    Tensor got = grads[next++];
    if (!got.defined()) {  // no path from the loss: only right when PyTorch's gradient is zero
      got = zeros(expected.shape(), expected.dtype());
    }
    EXPECT_TRUE(matches(got, expected, tol)) << "gradient of input '" << names[i] << "'";
  }
}

std::string case_test_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name;  // gtest names allow [A-Za-z0-9_] only
  for (char ch : info.param.family + "_" + info.param.name()) {
    if (ch == '-') name += "neg";
    else name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Ops, Golden, ::testing::ValuesIn(all_cases()), case_test_name);

TEST(GoldenCoverage, EveryCaseOpIsInTheTable) {
  ASSERT_FALSE(all_cases().empty()) << "no golden cases under " << golden_dir();
  for (const GoldenCase& c : all_cases()) {
    EXPECT_TRUE(golden_op_table().count(c.op())) << c.family << "/" << c.name() << ": op " << c.op();
  }
}

TEST(GoldenCoverage, EveryTableEntryHasACase) {
  std::set<std::string> ops;
  for (const GoldenCase& c : all_cases()) ops.insert(c.op());
  for (const auto& [op, fn] : golden_op_table()) {
    EXPECT_TRUE(ops.count(op)) << "golden_op_table entry " << op << " has no case";
  }
}

// Each op of the table has a golden case, except the helper ops that only gradient rules
// call (their results are checked through the gradients of the op they serve) and `group`,
// which has no math of its own: it runs the subgraph it holds (tests/ir/group_test.cpp), and the
// blocked channel layout's rows, which PyTorch has no op for: tests/kernels/conv_blocked_test.cpp
// checks them against conv2d and max_pool2d on NCHW.
TEST(GoldenCoverage, EveryTableOpHasACase) {
  std::set<std::string> ops;
  for (const GoldenCase& c : all_cases()) ops.insert(c.op());
  for (const std::string& op : op_table_names()) {
    if (op.find("_grad") != std::string::npos || op == "group") continue;
    if (op.find("blocked") != std::string::npos) continue;
    // The quantized ops' PyTorch cases are tests/golden/quantize.json (another format, read by
    // tests/ops/quantize_golden_test.cpp: quantize, dequantize, quantized linear and conv); the
    // Integer ops have no PyTorch op and are checked by ONNX's conformance cases
    // (test_matmulinteger, test_convinteger_*) and tests/ops/quantize_test.cpp.
    if (op == "quantize_linear" || op == "dequantize_linear" || op == "qlinear_matmul" ||
        op == "qlinear_conv2d" || op == "matmul_integer" || op == "conv2d_integer") {
      continue;
    }
    EXPECT_TRUE(ops.count(op)) << "op " << op << " has no golden case";
  }
}

}  // namespace
}  // namespace smelt::golden
