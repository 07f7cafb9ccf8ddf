// ONNX import of user-defined ops (smelt/custom_op.h): a node of the domain an op claims becomes
// that op, its attributes passed by name; a domain nobody claims is the usual unsupported error.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "support/check.h"
#include "support/errors.h"
#include "smelt/onnx.h"

// GCC 12 reports a -Wrestrict false positive inside std::string's assignment when protobuf's
// string setters are inlined into the model-building code below (an impossible 2^63-byte memcpy).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace smelt {
namespace {

using testing::expect_error;

// y = a + b * scale, claimed for ONNX nodes of the domain "com.smelt.test".
const CustomOp& scaled_add() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "test_onnx_scaled_add";
    def.num_inputs = 2;
    def.expression = [](const std::vector<Tensor>& in, const Attrs& attrs) -> std::vector<Tensor> {
      return {in[0] + in[1] * attrs.get_float("scale")};
    };
    def.onnx_domain = "com.smelt.test";
    return register_op(def);
  }();
  return op;
}

TEST(CustomOp, OnnxNodeOfItsDomainImports) {
  const CustomOp& op = scaled_add();
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* custom = m.add_opset_import();
  custom->set_domain("com.smelt.test");
  custom->set_version(1);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"a", "b"}) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto* n = g->add_node();
  n->set_op_type(op.name());
  n->set_domain("com.smelt.test");
  n->add_input("a");
  n->add_input("b");
  n->add_output("y");
  auto* attr = n->add_attribute();
  attr->set_name("scale");
  attr->set_type(::onnx::AttributeProto::FLOAT);
  attr->set_f(-0.5f);
  g->add_output()->set_name("y");
  onnx::Model model = onnx::import_model_bytes(m.SerializeAsString());
  EXPECT_EQ(model.graph.op_names(), std::vector<std::string>{op.name()});
  Tensor a = testing::random_tensor({2, 3}, -1, 1, 61).to(DType::Float32);
  Tensor b = testing::random_tensor({2, 3}, -1, 1, 62).to(DType::Float32);
  EXPECT_TRUE(testing::same_bits(model.graph.run({a, b})[0], a + b * -0.5));

  // A domain no op claims is the usual unsupported-op error, naming the way to claim it.
  n->set_domain("com.other");
  custom->set_domain("com.other");
  expect_error([&] { onnx::import_model_bytes(m.SerializeAsString()); },
               {"test_onnx_scaled_add", "com.other", "register_op"});
}

TEST(CustomOp, ExportWritesANodeOfItsDomainThatImportsBack) {
  const CustomOp& op = scaled_add();
  Tensor a = testing::random_tensor({3, 4}, -1, 1, 71).to(DType::Float32);
  Tensor b = testing::random_tensor({3, 4}, -1, 1, 72).to(DType::Float32);
  auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {op({in[0].relu(), in[1]}, {{"scale", 2.5}})[0] * 2.0};
  };
  Graph g = Graph::trace(fn, {a, b});
  const std::string bytes = onnx::save_bytes(g);
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  bool imported_domain = false;
  for (const auto& o : m.opset_import()) imported_domain |= o.domain() == "com.smelt.test" && o.version() == 1;
  EXPECT_TRUE(imported_domain);
  onnx::Model back = onnx::import_model_bytes(bytes);
  EXPECT_TRUE(testing::same_bits(back.graph.run({a, b})[0], fn({a, b}, {})[0]));

  // An op that claims no domain is written as its expression's ops; one without either has no
  // ONNX form, and the error says how to give it one.
  static const CustomOp doubled = [] {
    OpDefinition def;
    def.name = "test_onnx_no_domain";
    def.expression = [](const std::vector<Tensor>& in, const Attrs&) { return std::vector<Tensor>{in[0] * 2.0}; };
    return register_op(def);
  }();
  auto twice = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return doubled({in[0]}); };
  onnx::Model written_out = onnx::import_model_bytes(onnx::save_bytes(Graph::trace(twice, {a})));
  EXPECT_EQ(written_out.graph.op_names(), std::vector<std::string>{"mul"});
  EXPECT_TRUE(testing::same_bits(written_out.graph.run({a})[0], a * 2.0));
  static const CustomOp opaque = [] {
    OpDefinition def;
    def.name = "test_onnx_kernel_only";
    def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
      Tensor target = out[0];
      target.copy_(in[0]);
    };
    return register_op(def);
  }();
  Graph h = Graph::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return opaque({in[0]}); }, {a});
  expect_error([&] { onnx::save_bytes(h); }, {"test_onnx_kernel_only", "onnx_domain", "expression"});
}

TEST(CustomFunction, ExportWritesTheForwardsOps) {
  // apply_function traced for export: the forward's ops, the marker written out as what it is.
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return apply_function("double_it", {in[0]}, [&] { return std::vector<Tensor>{in[0] * 2.0}; },
                          [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0] * 2.0}; });
  };
  Tensor a = testing::random_tensor({2, 3}, -1, 1, 81).to(DType::Float32);
  Graph g = Graph::trace(fn, {a});
  onnx::Model back = onnx::import_model_bytes(onnx::save_bytes(g));
  EXPECT_TRUE(testing::same_bits(back.graph.run({a})[0], a * 2.0));
}

}  // namespace
}  // namespace smelt
