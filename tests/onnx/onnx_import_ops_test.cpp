// Imported ops in forms the conformance cases leave out, against naive loops: MaxPool's Indices
// output (explicit padding, ceil_mode, 1-D, column-major storage), AveragePool's dilations (opset
// 19's, none in the cases), 3-D ConvTranspose (strides, dilations, pads, groups, output_padding,
// bias) and ScatterND's and ScatterElements' mul, max and min reductions with repeated indices;
// inputs without a channel dim for the normalizations.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "support/check.h"
#include "support/errors.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"

namespace smelt {
namespace {

using Ints = std::vector<int64_t>;

struct Input {
  std::string name;
  Tensor value;
};

// One node `op` over `inputs` (graph inputs of their tensors' dtypes and shapes) with outputs
// y0, y1, ...; `attrs` adds its attributes.
std::string one_node_model(const std::string& op, const std::vector<Input>& inputs, int outputs,
                           const std::function<void(::onnx::NodeProto&)>& attrs, int64_t opset = 13) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n0");
  for (const Input& in : inputs) {
    auto* v = g->add_input();
    v->set_name(in.name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(in.value.dtype() == DType::Int64 ? ::onnx::TensorProto::INT64 : ::onnx::TensorProto::FLOAT);
    auto* shape = tt->mutable_shape();  // present also for a rank-0 input
    for (int64_t d : in.value.shape()) shape->add_dim()->set_dim_value(d);
    n->add_input(in.name);
  }
  for (int k = 0; k < outputs; ++k) {
    const std::string name = std::string(1, 'y').append(std::to_string(k));
    n->add_output(name);
    g->add_output()->set_name(name);
  }
  attrs(*n);
  return m.SerializeAsString();
}

void set_ints(::onnx::NodeProto& n, const std::string& name, const Ints& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void set_int(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_string(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

std::vector<Tensor> run_model(const std::string& bytes, const std::vector<Input>& inputs) {
  std::vector<Tensor> values;
  for (const Input& in : inputs) values.push_back(in.value);
  return onnx::import_model_bytes(bytes).graph.run(values);
}

// ---- MaxPool with Indices

struct PoolCase {
  Shape x;  // (N, C, H, W) or (N, C, W)
  Ints kernel, strides, pads, dilations;
  bool ceil_mode;
  int64_t storage_order;
};

void set_window(::onnx::NodeProto& n, const PoolCase& p) {
  set_ints(n, "kernel_shape", p.kernel);
  set_ints(n, "strides", p.strides);
  set_ints(n, "pads", p.pads);
  set_ints(n, "dilations", p.dilations);
  set_int(n, "ceil_mode", p.ceil_mode);
}

// ONNX's MaxPool over the real pixels only (pads never win), the first maximum in window order;
// indices over (N, C, H, W), each plane column-major with storage_order 1.
std::pair<std::vector<double>, std::vector<double>> naive_max_pool(const PoolCase& p, const std::vector<double>& x,
                                                                   Shape* out_shape) {
  const bool one_d = p.x.size() == 3;
  const int64_t N = p.x[0], C = p.x[1], H = one_d ? 1 : p.x[2], W = p.x.back();
  const Ints k = one_d ? Ints{1, p.kernel[0]} : p.kernel, s = one_d ? Ints{1, p.strides[0]} : p.strides;
  const Ints d = one_d ? Ints{1, p.dilations[0]} : p.dilations;
  const Ints pb = one_d ? Ints{0, p.pads[0]} : Ints{p.pads[0], p.pads[1]};
  const Ints pe = one_d ? Ints{0, p.pads[1]} : Ints{p.pads[2], p.pads[3]};
  auto out_size = [&](int64_t in, int i) {
    const double span = double((k[size_t(i)] - 1) * d[size_t(i)] + 1);
    const double v = double(in + pb[size_t(i)] + pe[size_t(i)] - span) / double(s[size_t(i)]) + 1;
    int64_t o = p.ceil_mode ? int64_t(std::ceil(v)) : int64_t(std::floor(v));
    if (p.ceil_mode && (o - 1) * s[size_t(i)] >= in + pb[size_t(i)]) --o;
    return o;
  };
  const int64_t Ho = out_size(H, 0), Wo = out_size(W, 1);
  *out_shape = one_d ? Shape{N, C, Wo} : Shape{N, C, Ho, Wo};
  std::vector<double> values, indices;
  for (int64_t plane = 0; plane < N * C; ++plane) {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < k[0]; ++i) {
          for (int64_t j = 0; j < k[1]; ++j) {
            const int64_t h = oh * s[0] - pb[0] + i * d[0], w = ow * s[1] - pb[1] + j * d[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = x[size_t((plane * H + h) * W + w)];
            if (at < 0 || v > best) best = v, at = p.storage_order ? w * H + h : h * W + w;
          }
        }
        values.push_back(best);
        indices.push_back(double(plane * H * W + at));
      }
    }
  }
  return {values, indices};
}

TEST(OnnxImportOps, MaxPoolIndicesMatchANaiveLoop) {
  const std::vector<PoolCase> cases = {
      {{2, 3, 5, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, 0},
      {{2, 3, 5, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, 1},
      {{1, 2, 7, 6}, {3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, false, 0},   // the op pads
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {2, 0, 1, 1}, {1, 1}, false, 0},   // asymmetric: -inf borders
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {2, 0, 1, 1}, {1, 1}, false, 1},
      {{1, 2, 7, 8}, {2, 3}, {2, 2}, {0, 1, 0, 1}, {2, 1}, true, 0},    // ceil_mode, dilation
      {{2, 2, 9}, {3}, {2}, {1, 2}, {1}, true, 0},                      // 1-D
  };
  for (const PoolCase& p : cases) {
    SCOPED_TRACE("x " + shape_str(p.x) + " kernel " + shape_str(p.kernel) + " pads " + shape_str(p.pads) +
                 " storage_order " + std::to_string(p.storage_order));
    const Tensor x = randn(p.x);
    const std::vector<Input> in{{"x", x}};
    const std::string model = one_node_model("MaxPool", in, 2, [&](::onnx::NodeProto& n) {
      set_window(n, p);
      set_int(n, "storage_order", p.storage_order);
    }, 12);
    const std::vector<Tensor> got = run_model(model, in);
    Shape want_shape;
    const auto [values, indices] = naive_max_pool(p, x.to_vector(), &want_shape);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].shape(), want_shape);
    EXPECT_EQ(got[1].shape(), want_shape);
    EXPECT_EQ(got[1].dtype(), DType::Int64);
    EXPECT_EQ(got[0].to_vector(), values);
    EXPECT_EQ(got[1].to_vector(), indices);
  }
}

// ---- AveragePool with dilations

// ONNX's AveragePool (dilations from opset 19): window o's taps sit at o s - pad_begin + t d; the
// divisor counts the taps inside [-pad_begin, in + pad_end) with count_include_pad, else those
// on the input. ceil_mode keeps a last partial window that starts before the end pad.
std::vector<double> naive_avg_pool(const PoolCase& p, bool include_pad, const std::vector<double>& x, Shape* out_shape) {
  const bool one_d = p.x.size() == 3;
  const int64_t planes = p.x[0] * p.x[1];
  const Ints in = one_d ? Ints{1, p.x[2]} : Ints{p.x[2], p.x[3]};
  const Ints k = one_d ? Ints{1, p.kernel[0]} : p.kernel, s = one_d ? Ints{1, p.strides[0]} : p.strides;
  const Ints d = one_d ? Ints{1, p.dilations[0]} : p.dilations;
  const Ints pb = one_d ? Ints{0, p.pads[0]} : Ints{p.pads[0], p.pads[1]};
  const Ints pe = one_d ? Ints{0, p.pads[1]} : Ints{p.pads[2], p.pads[3]};
  Ints out(2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t room = in[i] + pb[i] + pe[i] - (k[i] - 1) * d[i] - 1;
    out[i] = (p.ceil_mode ? (room + s[i] - 1) / s[i] : room / s[i]) + 1;
    if (p.ceil_mode && (out[i] - 1) * s[i] >= in[i] + pb[i]) --out[i];
  }
  *out_shape = one_d ? Shape{p.x[0], p.x[1], out[1]} : Shape{p.x[0], p.x[1], out[0], out[1]};
  std::vector<double> y;
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (int64_t oh = 0; oh < out[0]; ++oh) {
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double sum = 0;
        int64_t counted = 0;
        for (int64_t i = 0; i < k[0]; ++i) {
          for (int64_t j = 0; j < k[1]; ++j) {
            const int64_t h = oh * s[0] - pb[0] + i * d[0], w = ow * s[1] - pb[1] + j * d[1];
            const bool inside = h >= 0 && h < in[0] && w >= 0 && w < in[1];
            if (inside) sum += x[size_t((plane * in[0] + h) * in[1] + w)];
            if (inside || (include_pad && h < in[0] + pe[0] && w < in[1] + pe[1])) ++counted;
          }
        }
        y.push_back(sum / double(counted));
      }
    }
  }
  return y;
}

TEST(OnnxImportOps, DilatedAveragePoolMatchesANaiveLoop) {
  const std::vector<PoolCase> cases = {
      {{2, 3, 7, 8}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 2}, false, 0},
      {{1, 2, 9, 8}, {3, 2}, {2, 1}, {2, 1, 2, 1}, {2, 3}, false, 0},   // the op pads
      {{1, 2, 9, 8}, {2, 2}, {2, 2}, {3, 0, 1, 2}, {3, 2}, false, 0},   // asymmetric pads
      {{1, 2, 9, 8}, {2, 3}, {2, 2}, {0, 1, 0, 1}, {2, 1}, true, 0},    // ceil_mode
      {{2, 2, 11}, {3}, {2}, {1, 2}, {3}, true, 0},                     // 1-D
  };
  for (const PoolCase& p : cases) {
    for (bool include_pad : {false, true}) {
      SCOPED_TRACE("x " + shape_str(p.x) + " kernel " + shape_str(p.kernel) + " pads " + shape_str(p.pads) +
                   " dilations " + shape_str(p.dilations) + " count_include_pad " + std::to_string(include_pad));
      const Tensor x = randn(p.x);
      const std::vector<Input> in{{"x", x}};
      const std::string model = one_node_model("AveragePool", in, 1, [&](::onnx::NodeProto& n) {
        set_window(n, p);
        set_int(n, "count_include_pad", include_pad);
      }, 18);
      Shape want_shape;
      const std::vector<double> want = naive_avg_pool(p, include_pad, x.to_vector(), &want_shape);
      const Tensor got = run_model(model, in)[0];
      EXPECT_EQ(got.shape(), want_shape);
      EXPECT_TRUE(testing::all_close(got, cast(from_vector(want, want_shape), DType::Float32), 1e-5, 1e-6));
    }
  }
}

// ---- ConvTranspose 3-D

struct ConvTCase {
  Shape x, w;  // x (N, C, D, H, W), w (C, O / group, kD, kH, kW)
  Ints strides, dilations, pads, output_padding;
  int64_t group;
};

// y[n, g Og + o, i s - p + k d, ...] += x[n, g Cg + c, i, ...] w[g Cg + c, o, k, ...], cropped by the pads.
std::vector<double> naive_conv_transpose_3d(const ConvTCase& t, const std::vector<double>& x, const std::vector<double>& w,
                                            const std::vector<double>& bias, Shape* out_shape) {
  const int64_t N = t.x[0], C = t.x[1], G = t.group, Cg = C / G, Og = t.w[1], O = Og * G;
  Ints in(t.x.begin() + 2, t.x.end()), k(t.w.begin() + 2, t.w.end()), out(3);
  for (size_t i = 0; i < 3; ++i) {
    out[i] = t.strides[i] * (in[i] - 1) + t.output_padding[i] + (k[i] - 1) * t.dilations[i] + 1 - t.pads[i] -
             t.pads[i + 3];
  }
  *out_shape = {N, O, out[0], out[1], out[2]};
  std::vector<double> y(size_t(N * O * out[0] * out[1] * out[2]), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t o = 0; o < Og; ++o)
        for (int64_t a = 0; a < in[0]; ++a)
          for (int64_t b = 0; b < in[1]; ++b)
            for (int64_t e = 0; e < in[2]; ++e)
              for (int64_t ka = 0; ka < k[0]; ++ka)
                for (int64_t kb = 0; kb < k[1]; ++kb)
                  for (int64_t ke = 0; ke < k[2]; ++ke) {
                    const int64_t z = a * t.strides[0] - t.pads[0] + ka * t.dilations[0];
                    const int64_t h = b * t.strides[1] - t.pads[1] + kb * t.dilations[1];
                    const int64_t v = e * t.strides[2] - t.pads[2] + ke * t.dilations[2];
                    if (z < 0 || z >= out[0] || h < 0 || h >= out[1] || v < 0 || v >= out[2]) continue;
                    const int64_t oc = (c / Cg) * Og + o;
                    y[size_t((((n * O + oc) * out[0] + z) * out[1] + h) * out[2] + v)] +=
                        x[size_t((((n * C + c) * in[0] + a) * in[1] + b) * in[2] + e)] *
                        w[size_t((((c * Og + o) * k[0] + ka) * k[1] + kb) * k[2] + ke)];
                  }
  const int64_t plane = out[0] * out[1] * out[2];
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias[size_t((int64_t(i) / plane) % O)];
  return y;
}

TEST(OnnxImportOps, ConvTranspose3dMatchesANaiveLoop) {
  const std::vector<ConvTCase> cases = {
      {{1, 2, 3, 4, 3}, {2, 3, 2, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0}, 1},
      {{2, 2, 3, 3, 4}, {2, 2, 3, 2, 2}, {2, 1, 3}, {1, 2, 1}, {1, 0, 1, 0, 1, 2}, {1, 0, 2}, 1},
      {{1, 4, 2, 3, 3}, {4, 1, 2, 2, 3}, {3, 2, 1}, {2, 1, 1}, {0, 1, 1, 2, 0, 1}, {0, 1, 0}, 2},
  };
  for (const ConvTCase& t : cases) {
    SCOPED_TRACE("x " + shape_str(t.x) + " w " + shape_str(t.w) + " strides " + shape_str(t.strides));
    const Tensor x = randn(t.x), w = randn(t.w), b = randn({t.w[1] * t.group});
    const std::vector<Input> in{{"x", x}, {"w", w}, {"b", b}};
    const std::string model = one_node_model("ConvTranspose", in, 1, [&](::onnx::NodeProto& n) {
      set_ints(n, "strides", t.strides);
      set_ints(n, "dilations", t.dilations);
      set_ints(n, "pads", t.pads);
      set_ints(n, "output_padding", t.output_padding);
      set_int(n, "group", t.group);
    });
    const Tensor got = run_model(model, in)[0];
    Shape want_shape;
    const std::vector<double> want = naive_conv_transpose_3d(t, x.to_vector(), w.to_vector(), b.to_vector(), &want_shape);
    ASSERT_EQ(got.shape(), want_shape);
    EXPECT_TRUE(testing::all_close(got, cast(from_vector(want, want_shape), DType::Float32), 1e-4, 1e-5));
  }
}

// ---- ScatterND with mul, max and min

TEST(OnnxImportOps, ScatterNdReductionsFoldRepeatedRowsInOrder) {
  const Tensor data = randn({4, 3, 2});
  const Tensor indices = tensor({2, 0, 1, 2, 2, 1}).reshape({3, 2});  // rows (2, 0), (1, 2), (2, 1)
  const Tensor dup = tensor({3, 0, 3}).reshape({3, 1});                // row 3 twice, row 0 once
  const Tensor upd_rows = randn({3, 2}), upd_planes = randn({3, 3, 2});
  for (const std::string reduction : {"mul", "max", "min"}) {
    for (bool planes : {false, true}) {
      SCOPED_TRACE(reduction + (planes ? " over planes" : " over rows"));
      const Tensor idx = planes ? dup : indices, upd = planes ? upd_planes : upd_rows;
      const std::vector<Input> in{{"data", data}, {"indices", idx}, {"updates", upd}};
      const std::string model = one_node_model("ScatterND", in, 1, [&](::onnx::NodeProto& n) {
        set_string(n, "reduction", reduction);
      }, 18);
      std::vector<double> want = data.to_vector();
      const std::vector<double> iv = idx.to_vector(), uv = upd.to_vector();
      const int64_t rows = idx.size(0), block = planes ? 6 : 2;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = planes ? int64_t(iv[size_t(r)]) * 6 : (int64_t(iv[size_t(2 * r)]) * 3 + int64_t(iv[size_t(2 * r + 1)])) * 2;
        for (int64_t e = 0; e < block; ++e) {
          double& v = want[size_t(at + e)];
          const double u = uv[size_t(r * block + e)];
          v = reduction == "mul" ? double(float(v) * float(u)) : reduction == "max" ? std::max(v, u) : std::min(v, u);
        }
      }
      EXPECT_EQ(run_model(model, in)[0].to_vector(), want);
    }
  }
  // Too many update rows for a graph of one step per row: a clear refusal.
  const std::vector<Input> big{{"data", zeros({2000})}, {"indices", zeros({1500, 1}, DType::Int64)}, {"updates", zeros({1500})}};
  testing::expect_error([&] {
    onnx::import_model_bytes(one_node_model("ScatterND", big, 1, [](::onnx::NodeProto& n) { set_string(n, "reduction", "mul"); }, 16));
  }, {"ScatterND", "reduction 'mul' over 1500 update rows"});
}

// ---- ScatterElements with mul, max and min

// ONNX's reference: a copy of data, then each update (in row-major order of indices) folded into
// data at its position with the axis coordinate replaced by the (wrapped) index.
std::vector<double> naive_scatter_elements(const Tensor& data, const Tensor& idx, const Tensor& upd, int64_t axis,
                                           const std::string& reduction) {
  std::vector<double> out = data.to_vector();
  const std::vector<double> iv = idx.to_vector(), uv = upd.to_vector();
  const int64_t R = idx.size(0), C = idx.size(1), W = data.size(1), n = data.size(axis);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t col = 0; col < C; ++col) {
      int64_t at = int64_t(iv[size_t(r * C + col)]);
      if (at < 0) at += n;
      double& v = out[size_t(axis == 0 ? at * W + col : r * W + at)];
      const double u = uv[size_t(r * C + col)];
      v = reduction == "mul" ? double(float(v) * float(u)) : reduction == "max" ? std::max(v, u) : std::min(v, u);
    }
  }
  return out;
}

TEST(OnnxImportOps, ScatterElementsReductionsFoldRepeatedIndicesInOrder) {
  const Tensor data = randn({3, 4});
  const Tensor upd = randn({2, 3});
  // Repeated and negative indices: axis 1 hits (0, 1) twice and (1, 0) twice; axis 0 hits (2, 1) twice.
  const Tensor along_rows = tensor({1, -3, 3, 0, 0, -1}).reshape({2, 3});
  const Tensor along_cols = tensor({0, 2, -1, 2, -1, 0}).reshape({2, 3});
  for (const std::string reduction : {"mul", "max", "min"}) {
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(reduction + " along axis " + std::to_string(axis));
      const Tensor idx = axis == 1 ? along_rows : along_cols;
      const std::vector<Input> in{{"data", data}, {"indices", idx}, {"updates", upd}};
      const std::string model = one_node_model("ScatterElements", in, 1, [&](::onnx::NodeProto& n) {
        set_string(n, "reduction", reduction);
        set_int(n, "axis", axis);
      }, 18);
      EXPECT_EQ(run_model(model, in)[0].to_vector(), naive_scatter_elements(data, idx, upd, axis, reduction));
    }
  }
  // An index outside [-n, n) is refused, not folded into some other element.
  const std::vector<Input> bad{{"data", data}, {"indices", tensor({4, 0, 0, 0, 0, 0}).reshape({2, 3})}, {"updates", upd}};
  testing::expect_error([&] {
    run_model(one_node_model("ScatterElements", bad, 1, [](::onnx::NodeProto& n) { set_string(n, "reduction", "max"); }, 16), bad);
  }, "gather");
  // Updates of another shape than the indices: a clear error naming both.
  const std::vector<Input> mismatch{{"data", data}, {"indices", along_rows}, {"updates", randn({3, 2})}};
  testing::expect_error([&] {
    onnx::import_model_bytes(one_node_model("ScatterElements", mismatch, 1, [](::onnx::NodeProto& n) { set_string(n, "reduction", "min"); }, 16));
  }, {"ScatterElements", "updates (3, 2) must have the shape of indices (2, 3)"});
}

// Normalizations broadcast their parameters over dim 1: an input without one is refused
// (libFuzzer: a rank-0 input wrote past a 0-entry shape; tests/onnx/regressions).
TEST(OnnxImportOps, NormalizationsNeedAChannelDim) {
  const Tensor c = randn({3});
  for (const Shape& x : {Shape{}, Shape{3}}) {
    const std::vector<Input> bn{{"x", randn(x)}, {"s", c}, {"b", c}, {"m", c}, {"v", c}};
    testing::expect_error([&] { onnx::import_model_bytes(one_node_model("BatchNormalization", bn, 1, [](::onnx::NodeProto&) {})); },
                          {"BatchNormalization", "must be (N, C, ...)"});
    const std::vector<Input> in{{"x", randn(x)}, {"s", c}, {"b", c}};
    testing::expect_error([&] { onnx::import_model_bytes(one_node_model("InstanceNormalization", in, 1, [](::onnx::NodeProto&) {})); },
                          "InstanceNormalization");
  }
}

}  // namespace
}  // namespace smelt
