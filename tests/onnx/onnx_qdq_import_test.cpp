// QDQ models' quantized initializers at import (onnx/quantized_weights.h): a DequantizeLinear of
// initializers is computed during import like any node of known inputs, so converters that read
// values get them; only a conv's or matmul's weight reads its integers again through a node
// (tests/passes/fold_qdq_test.cpp follows those through the pipeline).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"

// GCC 12 reports a -Wrestrict false positive inside std::string's assignment when protobuf's
// string setters are inlined into the model-building code below (an impossible 2^63-byte memcpy).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace smelt {
namespace {

using ops::OpId;

int count(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

// A DequantizeLinear of initializers whose value a converter needs at import (Pad's constant
// value) is computed during import, as before QDQ weights were kept: the model imports, and a
// weight dequantized for something other than a conv or matmul (an add) stays a constant.
TEST(OnnxQdqImport, QuantizedInitializersThatConvertersReadImport) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 2, 3}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  auto initializer = [&](const std::string& name, ::onnx::TensorProto::DataType type, const std::vector<int64_t>& dims,
                         const std::vector<int32_t>& values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    if (type == ::onnx::TensorProto::FLOAT) {
      for (int32_t v : values) t->add_float_data(float(v) / 100.0f);
    } else if (type == ::onnx::TensorProto::INT64) {
      for (int32_t v : values) t->add_int64_data(v);
    } else {
      for (int32_t v : values) t->add_int32_data(v);
    }
  };
  initializer("q", ::onnx::TensorProto::INT8, {}, {-7});
  initializer("s", ::onnx::TensorProto::FLOAT, {}, {50});
  initializer("qv", ::onnx::TensorProto::INT8, {6}, {1, -2, 3, -4, 5, -6});
  initializer("pads", ::onnx::TensorProto::INT64, {6}, {0, 0, 1, 0, 0, 2});
  auto node = [&](const std::string& op, const std::vector<std::string>& ins, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const std::string& i : ins) n->add_input(i);
    n->add_output(out);
  };
  node("DequantizeLinear", {"q", "s"}, "c");     // -3.5
  node("DequantizeLinear", {"qv", "s"}, "v");    // 0.5, -1, 1.5, -2, 2.5, -3
  node("Pad", {"x", "pads", "c"}, "p");
  node("Add", {"p", "v"}, "y");
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  onnx::Model model = onnx::import_model_bytes(bytes);
  EXPECT_EQ(count(model.graph.ir_graph(), OpId::dequantize_linear), 0);
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 2, 3});
  const std::vector<double> y = model.graph.run({x})[0].to_vector();
  ASSERT_EQ(y.size(), 12u);  // (1, 2, 6): one column of -3.5 before each row, two after, plus v
  EXPECT_EQ(y, (std::vector<double>{-3.0, 0.0, 3.5, 1.0, -1.0, -6.5, -3.0, 3.0, 6.5, 4.0, -1.0, -6.5}));
}

}  // namespace
}  // namespace smelt
