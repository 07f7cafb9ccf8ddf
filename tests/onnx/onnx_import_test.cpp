// ONNX import: what the conformance cases cannot show — malformed, truncated and hostile files,
// external data and paths out of the model's directory, symbolic dims, the messages of
// unsupported ops and attributes, and shape subgraphs folded at import.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "support/errors.h"
#include "support/temp_dir.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"

namespace smelt {
namespace {

using testing::expect_error;

// A one-input model around `add_nodes`, opset 13, input x: float32 `dims` (dim_param where < 0).
::onnx::ModelProto model(const std::vector<int64_t>& dims, const std::function<void(::onnx::GraphProto&)>& add_nodes,
                         int64_t opset = 13) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (d >= 0) dim->set_dim_value(d);
    else dim->set_dim_param("N");
  }
  add_nodes(*g);
  g->add_output()->set_name("y");
  return m;
}

::onnx::NodeProto* node(::onnx::GraphProto& g, const std::string& op, std::vector<std::string> in, std::string out,
                        const std::string& name = "n0") {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

std::string bytes(const ::onnx::ModelProto& m) { return m.SerializeAsString(); }

void relu_graph(::onnx::GraphProto& g) { node(g, "Relu", {"x"}, "y"); }

TEST(OnnxImport, ReluRunsAndMatchesTheReference) {
  onnx::Model m = onnx::import_model_bytes(bytes(model({2, 3}, relu_graph)));
  EXPECT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.output_names, std::vector<std::string>{"y"});
  EXPECT_EQ(m.graph.op_names(), std::vector<std::string>{"relu"});
  Tensor x = from_vector(std::vector<float>{-1, 0, 2, -0.0f, 3, -5}, {2, 3});
  EXPECT_EQ(m.graph.run({x})[0].to_vector(), (std::vector<double>{0, 0, 2, 0, 3, 0}));
}

TEST(OnnxImport, SymbolicDimsNeedAValue) {
  const std::string b = bytes(model({-1, 3}, relu_graph));
  expect_error([&] { onnx::import_model_bytes(b); }, {"graph input 'x'", "symbolic ('N')", "--dim"});
  onnx::ImportOptions o;
  o.dims["N"] = 5;
  onnx::Model m = onnx::import_model_bytes(b, o);
  EXPECT_EQ(m.graph.run({zeros({5, 3})})[0].shape(), (Shape{5, 3}));
  onnx::ImportOptions given;
  given.input_shapes["x"] = {7, 3};
  EXPECT_EQ(onnx::import_model_bytes(b, given).graph.run({zeros({7, 3})})[0].shape(), (Shape{7, 3}));
  given.input_shapes["x"] = {7, 4};  // dim 1 is fixed at 3
  expect_error([&] { onnx::import_model_bytes(b, given); }, {"dim 1 is 3 in the model", "has 4"});
}

TEST(OnnxImport, UnsupportedOpAndAttributeNameNodeOpOpset) {
  const std::string op = bytes(model({2}, [](::onnx::GraphProto& g) { node(g, "FancyOp", {"x"}, "y", "mine"); }));
  try {
    onnx::import_model_bytes(op);
    FAIL() << "no error";
  } catch (const onnx::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 'mine' (FancyOp, opset 13): op FancyOp is not supported"), std::string::npos) << e.what();
  }
  const std::string attr = bytes(model({2}, [](::onnx::GraphProto& g) {
    auto* a = node(g, "Relu", {"x"}, "y", "r")->add_attribute();
    a->set_name("flavour");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(1);
  }));
  try {
    onnx::import_model_bytes(attr);
    FAIL() << "no error";
  } catch (const onnx::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 'r' (Relu, opset 13): attribute 'flavour' (int) is not supported"), std::string::npos) << e.what();
  }
  // A nested graph attribute (If/Loop bodies) is refused by name, too.
  const std::string graph_attr = bytes(model({2}, [](::onnx::GraphProto& g) {
    auto* a = node(g, "Relu", {"x"}, "y", "r")->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name("inner");
  }));
  expect_error([&] { onnx::import_model_bytes(graph_attr); }, "attribute 'body' (graph) is not supported");
  // An attribute of the wrong type is the model's mistake.
  const std::string wrong = bytes(model({2}, [](::onnx::GraphProto& g) {
    auto* a = node(g, "LeakyRelu", {"x"}, "y", "l")->add_attribute();
    a->set_name("alpha");
    a->set_type(::onnx::AttributeProto::INTS);
    a->add_ints(1);
  }));
  expect_error([&] { onnx::import_model_bytes(wrong); }, {"node 'l' (LeakyRelu, opset 13)", "'alpha' must be of type float"});
  expect_error([&] { onnx::import_model_bytes(bytes(model({2}, relu_graph, 19))); }, "opset 19");
}

TEST(OnnxImport, ShapeSubgraphsFoldAtImport) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): only the reshape remains.
  const std::string b = bytes(model({4, 3, 2}, [](::onnx::GraphProto& g) {
    node(g, "Shape", {"x"}, "s", "shape");
    auto* zero = g.add_initializer();
    zero->set_name("zero");
    zero->set_data_type(::onnx::TensorProto::INT64);
    zero->add_int64_data(0);
    auto* minus1 = g.add_initializer();
    minus1->set_name("m1");
    minus1->set_data_type(::onnx::TensorProto::INT64);
    minus1->add_dims(1);
    minus1->add_int64_data(-1);
    node(g, "Gather", {"s", "zero"}, "n", "gather");
    auto* un = node(g, "Unsqueeze", {"n", "zero1"}, "n1", "unsq");
    (void)un;
    auto* z1 = g.add_initializer();
    z1->set_name("zero1");
    z1->set_data_type(::onnx::TensorProto::INT64);
    z1->add_dims(1);
    z1->add_int64_data(0);
    auto* cat = node(g, "Concat", {"n1", "m1"}, "shape2", "concat");
    auto* axis = cat->add_attribute();
    axis->set_name("axis");
    axis->set_type(::onnx::AttributeProto::INT);
    axis->set_i(0);
    node(g, "Reshape", {"x", "shape2"}, "y", "reshape");
  }));
  onnx::Model m = onnx::import_model_bytes(b);
  EXPECT_EQ(m.graph.op_names(), std::vector<std::string>{"reshape"});
  EXPECT_EQ(m.graph.run({zeros({4, 3, 2})})[0].shape(), (Shape{4, 6}));
}

TEST(OnnxImport, MalformedAndTruncatedBytesAreErrors) {
  const std::string good = bytes(model({2, 3}, relu_graph));
  // Every prefix: imports or is refused, never crashes, never an internal error.
  for (size_t n = 0; n < good.size(); ++n) {
    try {
      onnx::import_model_bytes(good.substr(0, n));
    } catch (const Error& e) {
      EXPECT_FALSE(e.internal()) << e.what();
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string b = good;
    b[rng() % b.size()] = char(rng());
    try {
      onnx::import_model_bytes(b);
    } catch (const Error& e) {
      EXPECT_FALSE(e.internal()) << e.what();
    }
  }
  expect_error([] { onnx::import_model_bytes("not a model at all"); }, "not a valid ONNX model");
}

::onnx::TensorProto* weight(::onnx::GraphProto& g, std::vector<int64_t> dims) {
  auto* w = g.add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) w->add_dims(d);
  return w;
}

TEST(OnnxImport, HostileTensorsAreRefusedBeforeAllocating) {
  auto with_weight = [](const std::function<void(::onnx::TensorProto&)>& edit) {
    return bytes(model({2}, [&](::onnx::GraphProto& g) {
      edit(*weight(g, {2}));
      node(g, "Add", {"x", "w"}, "y");
    }));
  };
  expect_error([&] { onnx::import_model_bytes(with_weight([](auto& w) { w.set_raw_data(std::string(7, '\0')); })); },
               {"initializer 'w'", "raw_data holds 7 bytes", "need 8"});
  expect_error([&] { onnx::import_model_bytes(with_weight([](auto& w) { w.add_float_data(1); })); },
               {"holds 1 values", "need 2"});
  expect_error([&] {
    onnx::import_model_bytes(with_weight([](auto& w) {
      w.clear_dims();
      for (int i = 0; i < 4; ++i) w.add_dims(int64_t(1) << 20);  // 2^80 elements
    }));
  }, "overflows");
  expect_error([&] {
    onnx::import_model_bytes(with_weight([](auto& w) {
      w.set_dims(0, int64_t(1) << 40);  // 2^40 floats claimed, none given
    }));
  }, "holds 0 values");
  expect_error([&] { onnx::import_model_bytes(with_weight([](auto& w) { w.set_dims(0, -3); })); }, "negative");
  expect_error([&] { onnx::import_model_bytes(with_weight([](auto& w) { w.set_data_type(::onnx::TensorProto::FLOAT16); })); },
               "dtype float16");
}

// int32 initializers from either encoding (int32_data, raw_data), Cast to INT32 (truncation),
// and int32 arithmetic that wraps in 32 bits: y = Cast(x, INT32) + w.
TEST(OnnxImport, Int32InitializersCastAndWrap) {
  const int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  const std::vector<int32_t> w_values = {kMin, -1, 7, kMax};
  for (bool raw : {false, true}) {
    const std::string b = bytes(model({4}, [&](::onnx::GraphProto& g) {
      ::onnx::TensorProto* w = weight(g, {4});
      w->set_data_type(::onnx::TensorProto::INT32);
      if (raw) w->set_raw_data(std::string(reinterpret_cast<const char*>(w_values.data()), 16));
      else for (int32_t v : w_values) w->add_int32_data(v);
      auto* cast = node(g, "Cast", {"x"}, "xi", "c0");
      auto* to = cast->add_attribute();
      to->set_name("to");
      to->set_type(::onnx::AttributeProto::INT);
      to->set_i(::onnx::TensorProto::INT32);
      node(g, "Add", {"xi", "w"}, "y", "a0");
    }));
    onnx::Model m = onnx::import_model_bytes(b);
    Tensor y = m.graph.run({from_vector(std::vector<float>{0.0f, 2.9f, -2.9f, 1.0f}, {4})})[0];
    ASSERT_EQ(y.dtype(), DType::Int32) << raw;
    const int32_t* p = y.contiguous().data<int32_t>();
    EXPECT_EQ(std::vector<int32_t>(p, p + 4), (std::vector<int32_t>{kMin, 1, 5, kMin})) << raw;
  }
}

class OnnxExternalData : public testing::TempDirTest {
 protected:
  // Writes model.onnx whose weight w (2 floats) lives in `location` at `offset`.
  std::string write_model(const std::string& location, int64_t offset = 0) {
    ::onnx::ModelProto m = model({2}, [&](::onnx::GraphProto& g) {
      auto* w = weight(g, {2});
      w->set_data_location(::onnx::TensorProto::EXTERNAL);
      auto* kv = w->add_external_data();
      kv->set_key("location");
      kv->set_value(location);
      kv = w->add_external_data();
      kv->set_key("offset");
      kv->set_value(std::to_string(offset));
      node(g, "Add", {"x", "w"}, "y");
    });
    std::ofstream(path("model.onnx"), std::ios::binary) << bytes(m);
    return path("model.onnx");
  }
  void write_weights(const std::string& file, std::vector<float> v, size_t pad = 0) {
    std::ofstream f(file, std::ios::binary);
    f << std::string(pad, 'x');
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  }
};

TEST_F(OnnxExternalData, ReadsFilesBesideTheModel) {
  write_weights(path("w.bin"), {10, 20}, 4);
  onnx::Model m = onnx::import_model(write_model("w.bin", 4));
  EXPECT_EQ(m.graph.run({from_vector(std::vector<float>{1, 2}, {2})})[0].to_vector(), (std::vector<double>{11, 22}));
}

TEST_F(OnnxExternalData, RefusesPathsOutOfTheModelDirectory) {
  std::filesystem::create_directories(path("inner"));
  write_weights(path("outside.bin"), {1, 2});
  std::ofstream(path("inner/model.onnx"));
  auto model_in_inner = [&](const std::string& location) {
    const std::string p = write_model(location);
    std::filesystem::rename(p, path("inner/model.onnx"));
    return path("inner/model.onnx");
  };
  expect_error([&] { onnx::import_model(model_in_inner("../outside.bin")); }, "leaves the model's directory");
  expect_error([&] { onnx::import_model(model_in_inner(path("outside.bin"))); }, "must be a relative path");
  std::filesystem::create_symlink(path("outside.bin"), path("inner/link.bin"));
  expect_error([&] { onnx::import_model(model_in_inner("link.bin")); }, "outside the model's directory");
  write_weights(path("inner/short.bin"), {1});
  expect_error([&] { onnx::import_model(model_in_inner("short.bin")); }, "runs past the end");
  expect_error([&] { onnx::import_model(model_in_inner("missing.bin")); }, "cannot read external data");
  // From bytes there is no directory to read from.
  expect_error([&] { onnx::import_model_bytes(bytes(model({2}, [&](::onnx::GraphProto& g) {
                   auto* w = weight(g, {2});
                   w->set_data_location(::onnx::TensorProto::EXTERNAL);
                   auto* kv = w->add_external_data();
                   kv->set_key("location");
                   kv->set_value("w.bin");
                   node(g, "Add", {"x", "w"}, "y");
                 }))); },
               "needs a model file on disk");
}

TEST_F(OnnxExternalData, TensorFilesRoundTrip) {
  Tensor t = from_vector(std::vector<float>{1.5f, -0.0f, std::numeric_limits<float>::infinity()}, {3, 1});
  onnx::write_tensor_file(path("t.pb"), t, "named");
  std::string name;
  Tensor back = onnx::read_tensor_file(path("t.pb"), &name);
  EXPECT_EQ(name, "named");
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.to_vector(), t.to_vector());
}

TEST(OnnxImport, InitializersAsParams) {
  const std::string b = bytes(model({2}, [](::onnx::GraphProto& g) {
    auto* w = weight(g, {2});
    w->add_float_data(1);
    w->add_float_data(2);
    node(g, "Mul", {"x", "w"}, "y");
  }));
  onnx::ImportOptions o;
  o.initializers_as_params = true;
  onnx::Model m = onnx::import_model_bytes(b, o);
  ASSERT_EQ(m.param_names, std::vector<std::string>{"w"});
  EXPECT_EQ(m.graph.num_inputs(), 2u);
  Tensor x = from_vector(std::vector<float>{3, 4}, {2});
  EXPECT_EQ(m.graph.run({x, m.params[0]})[0].to_vector(), (std::vector<double>{3, 8}));
  EXPECT_EQ(m.graph.run({x, from_vector(std::vector<float>{-1, 0}, {2})})[0].to_vector(), (std::vector<double>{-3, 0}));
}

// A QDQ model's DequantizeLinear of initializers is computed during import, as any node of known
// inputs, so converters that read values get them (Pad's constant value); only a conv's or
// matmul's weight reads its integers again through a node (onnx/quantized_weights.h;
// tests/passes/fold_qdq_test.cpp follows those through the pipeline).
TEST(OnnxImport, QuantizedInitializersThatConvertersReadImport) {
  ::onnx::ModelProto m = model({1, 2, 3}, [](::onnx::GraphProto& g) {
    auto initializer = [&](const std::string& name, ::onnx::TensorProto::DataType type, const std::vector<int64_t>& dims,
                           const std::vector<int32_t>& values) {
      auto* t = g.add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      for (int64_t d : dims) t->add_dims(d);
      for (int32_t v : values) {
        if (type == ::onnx::TensorProto::FLOAT) t->add_float_data(float(v) / 100.0f);
        else if (type == ::onnx::TensorProto::INT64) t->add_int64_data(v);
        else t->add_int32_data(v);
      }
    };
    initializer("q", ::onnx::TensorProto::INT8, {}, {-7});
    initializer("s", ::onnx::TensorProto::FLOAT, {}, {50});
    initializer("qv", ::onnx::TensorProto::INT8, {6}, {1, -2, 3, -4, 5, -6});
    initializer("pads", ::onnx::TensorProto::INT64, {6}, {0, 0, 1, 0, 0, 2});
    auto node = [&](const std::string& op, const std::vector<std::string>& ins, const std::string& out) {
      auto* n = g.add_node();
      n->set_op_type(op);
      for (const std::string& i : ins) n->add_input(i);
      n->add_output(out);
    };
    node("DequantizeLinear", {"q", "s"}, "c");   // -3.5
    node("DequantizeLinear", {"qv", "s"}, "v");  // 0.5, -1, 1.5, -2, 2.5, -3
    node("Pad", {"x", "pads", "c"}, "p");
    node("Add", {"p", "v"}, "y");
  });
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  onnx::Model imported = onnx::import_model_bytes(bytes);
  const std::vector<std::string> ops = imported.graph.op_names();
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "dequantize_linear"), 0);  // both computed at import
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 2, 3});
  // (1, 2, 6): one column of -3.5 before each row, two after, plus v
  EXPECT_EQ(imported.graph.run({x})[0].to_vector(),
            (std::vector<double>{-3.0, 0.0, 3.5, 1.0, -1.0, -6.5, -3.0, 3.0, 6.5, 4.0, -1.0, -6.5}));
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Einsum "ijk,kjl->li" (j and k contracted, the output permuted) against a naive loop, and a
// letter summed on one side only ("ab,c->a").
TEST(OnnxImport, EinsumContractionsMatchANaiveLoop) {
  auto einsum_model = [](const std::string& eq, std::vector<int64_t> a, std::vector<int64_t> b) {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto* g = m.mutable_graph();
    for (auto [name, dims] : {std::pair{"a", a}, std::pair{"b", b}}) {
      auto* in = g->add_input();
      in->set_name(name);
      auto* tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(::onnx::TensorProto::FLOAT);
      for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    auto* n = g->add_node();
    n->set_op_type("Einsum");
    n->add_input("a");
    n->add_input("b");
    n->add_output("y");
    auto* attr = n->add_attribute();
    attr->set_name("equation");
    attr->set_type(::onnx::AttributeProto::STRING);
    attr->set_s(eq);
    g->add_output()->set_name("y");
    return m.SerializeAsString();
  };
  Tensor a = randn({2, 3, 4}), b = randn({4, 3, 5});
  Tensor y = onnx::import_model_bytes(einsum_model("ijk, kjl -> li", {2, 3, 4}, {4, 3, 5})).graph.run({a, b})[0];
  ASSERT_EQ(y.shape(), (Shape{5, 2}));
  std::vector<double> av = a.to_vector(), bv = b.to_vector(), yv = y.to_vector();
  for (int l = 0; l < 5; ++l) {
    for (int i = 0; i < 2; ++i) {
      double want = 0;
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 4; ++k) want += av[size_t((i * 3 + j) * 4 + k)] * bv[size_t((k * 3 + j) * 5 + l)];
      }
      EXPECT_NEAR(yv[size_t(l * 2 + i)], want, 1e-4) << "l " << l << " i " << i;
    }
  }
  Tensor p = randn({2, 3}), q = randn({4});
  Tensor z = onnx::import_model_bytes(einsum_model("ab,c->a", {2, 3}, {4})).graph.run({p, q})[0];
  std::vector<double> pv = p.to_vector(), qv = q.to_vector(), zv = z.to_vector();
  const double qs = qv[0] + qv[1] + qv[2] + qv[3];
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(zv[size_t(i)], (pv[size_t(3 * i)] + pv[size_t(3 * i + 1)] + pv[size_t(3 * i + 2)]) * qs, 1e-4);
  expect_error([&] { onnx::import_model_bytes(einsum_model("ii,ij->j", {3, 3}, {3, 2})); }, "diagonal");
  expect_error([&] { onnx::import_model_bytes(einsum_model("ab,bc->az", {2, 3}, {3, 2})); }, "output letter 'z'");
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Inputs the fuzzer (fuzz_targets/onnx_fuzz.cpp) found crashing, kept as regressions: each must
// import or be refused with a user error. conv_weight_rank_0.onnx: a Conv whose weight has no
// dims (the kernel size was read from dims it does not have); convtranspose_short_output_shape.onnx:
// an output_shape with fewer entries than spatial dims (read past its end);
// batchnorm_input_below_rank_2.onnx: a BatchNormalization of a rank-0 input (a write past the
// end of an empty shape); convtranspose_3d_large_output.onnx: a 3-D ConvTranspose whose output
// holds 1.4e7 values with 35 depth taps (import made a zero tensor of that size per tap: a timeout).
TEST(OnnxImport, FuzzerRegressions) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SMELT_TEST_DIR) + "/onnx/regressions")) {
    std::ifstream f(e.path(), std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    onnx::ImportOptions o;
    o.dims["N"] = 2;
    try {
      onnx::import_model_bytes(b, o);
    } catch (const Error& err) {
      EXPECT_FALSE(err.internal()) << e.path() << ": " << err.what();
    }
    ++n;
  }
  EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace smelt
