// ONNX model -> smelt graph. The walk is a trace: graph inputs are symbolic tensors, initializers
// and Constants are concrete ones, and each node's converter calls smelt ops on them, so the
// dispatcher records IR nodes (trace/). A node whose inputs are all concrete runs eagerly
// instead (the tracer's hook is lifted for it): shape arithmetic on known shapes and transforms
// of weights become constants during import, never graph nodes. A QDQ model's weights (a
// DequantizeLinear of integers) are recorded as they are computed, and after the trace a conv's or
// matmul's weight reads a dequantize_linear node of its integers again (onnx/quantized_weights.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <unordered_map>

#include "onnx/node_context.h"
#include "onnx/quantized_weights.h"
#include "ops/custom_ops.h"
#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "trace/trace.h"

namespace smelt::onnx_import {
namespace {

// ONNX opsets this importer knows; older ones load where the ops read them the same way (each
// converter looks at opset() where semantics changed).
constexpr int64_t kMaxOpset = 18;

// Lifts the tracer's hook for one node whose inputs are all known: its ops compute.
class EagerScope {
 public:
  EagerScope() : prev_(ops::set_dispatch_hook(nullptr)) {}
  ~EagerScope() { ops::set_dispatch_hook(prev_); }

 private:
  ops::DispatchHook* prev_;
};

std::string clip(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

int64_t default_opset(const ::onnx::ModelProto& m) {
  int64_t version = -1;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") version = o.version();
  }
  if (version > kMaxOpset) {
    throw onnx::Unsupported("onnx: the model uses opset " + std::to_string(version) + "; supported: up to " +
                            std::to_string(kMaxOpset));
  }
  return version;
}

onnx::ValueInfo value_info(const ::onnx::ValueInfoProto& v) {
  onnx::ValueInfo info;
  info.name = v.name();
  if (!v.type().has_tensor_type()) {
    info.dtype = v.type().has_sequence_type() ? "sequence" : v.type().has_optional_type() ? "optional" : v.type().has_map_type() ? "map" : "unknown";
    return info;
  }
  const auto& tt = v.type().tensor_type();
  info.dtype = onnx_type_name(tt.elem_type());
  info.has_shape = tt.has_shape();
  for (const auto& d : tt.shape().dim()) {
    info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  return info;
}

// The concrete shape of graph input `v`: the option's shape, checked against the model's fixed
// dims, or the model's dims with symbolic ones from options.dims.
Shape input_shape(const ::onnx::ValueInfoProto& v, const onnx::ImportOptions& options) {
  const onnx::ValueInfo info = value_info(v);
  const std::string where = "onnx: graph input '" + clip(v.name()) + "'";
  if (!v.type().has_tensor_type()) throw onnx::Unsupported(where + " is a " + info.dtype + "; only tensors are supported");
  auto given = options.input_shapes.find(v.name());
  if (given != options.input_shapes.end()) {
    const auto& s = given->second;
    SMELT_CHECK(!info.has_shape || s.size() == info.dims.size())
        << where << " has rank " << info.dims.size() << ", the given shape " << shape_str(Shape(s.begin(), s.end()))
        << " has rank " << s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      SMELT_CHECK(s[i] >= 0) << where << ": dim " << i << " of the given shape is negative";
      SMELT_CHECK(!info.has_shape || info.dims[i] < 0 || info.dims[i] == s[i])
          << where << ": dim " << i << " is " << info.dims[i] << " in the model, the given shape has " << s[i];
    }
    return Shape(s.begin(), s.end());
  }
  SMELT_CHECK(info.has_shape) << where << " declares no shape; give one (smelt run --input NAME=FILE.npy)";
  Shape shape;
  for (size_t i = 0; i < info.dims.size(); ++i) {
    int64_t d = info.dims[i];
    if (d < 0) {
      auto it = options.dims.find(info.dim_names[i]);
      SMELT_CHECK(!info.dim_names[i].empty() && it != options.dims.end())
          << where << ": dim " << i << " is symbolic ('" << clip(info.dim_names[i])
          << "'); give its value (smelt run --dim NAME=VALUE) or the input's shape";
      d = it->second;
      SMELT_CHECK(d >= 0) << where << ": dim '" << clip(info.dim_names[i]) << "' = " << d << " must be >= 0";
    }
    shape.push_back(d);
  }
  return shape;
}

struct Prepared {
  std::vector<Tensor> examples;
  std::vector<std::string> input_names;
  std::vector<Tensor> params;
  std::vector<std::string> param_names;
  std::unordered_map<std::string, Tensor> constants;  // initializers kept as constants
};

Prepared prepare(const ::onnx::GraphProto& g, const std::string& model_dir, const onnx::ImportOptions& options) {
  Prepared p;
  if (g.sparse_initializer_size() > 0) throw onnx::Unsupported("onnx: sparse initializers are not supported");
  std::unordered_map<std::string, Tensor> inits;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const auto& t = g.initializer(i);
    SMELT_CHECK(!t.name().empty()) << "onnx: initializer " << i << " has no name";
    inits[t.name()] = tensor_from_proto(t, model_dir, "onnx: initializer '" + clip(t.name()) + "'");
  }
  for (const auto& v : g.input()) {
    if (inits.count(v.name())) continue;  // an input with a default: the initializer's value
    auto bound = options.input_values.find(v.name());
    if (bound != options.input_values.end()) {
      const std::string where = "onnx: graph input '" + clip(v.name()) + "'";
      if (!v.type().has_tensor_type()) throw onnx::Unsupported(where + " is not a tensor");
      const DType dtype = dtype_from_onnx(v.type().tensor_type().elem_type(), where);
      SMELT_CHECK(bound->second.dtype() == dtype) << where << " is " << dtype_name(dtype) << ", the bound value "
                                                  << dtype_name(bound->second.dtype());
      input_shape(v, options);  // checks the value's shape against the model's
      p.constants[v.name()] = bound->second.contiguous();
      continue;
    }
    if (!v.type().has_tensor_type()) throw onnx::Unsupported("onnx: graph input '" + clip(v.name()) + "' is not a tensor");
    const DType dtype = dtype_from_onnx(v.type().tensor_type().elem_type(), "onnx: graph input '" + clip(v.name()) + "'");
    const Shape shape = input_shape(v, options);
    int64_t n = 1;
    for (int64_t d : shape) SMELT_CHECK(d == 0 || n <= INT64_MAX / d) << "onnx: input '" << clip(v.name()) << "' is too large", n *= d;
    // Only the shape and dtype matter to the trace: a broadcast scalar allocates nothing.
    p.examples.push_back(scalar_tensor(0, dtype).expand(shape));
    p.input_names.push_back(v.name());
  }
  for (auto& [name, t] : inits) {
    if (options.initializers_as_params && dtype_is_floating(t.dtype())) {
      p.param_names.push_back(name);
    } else {
      p.constants[name] = t;
    }
  }
  std::sort(p.param_names.begin(), p.param_names.end());
  for (const auto& name : p.param_names) p.params.push_back(inits[name]);
  return p;
}

// Converts one node: its inputs from `values`, its outputs into `values`.
void convert_node(const ::onnx::NodeProto& node, int64_t opset, const std::string& model_dir,
                  std::unordered_map<std::string, Tensor>& values, std::vector<DequantizedWeight>& weights) {
  std::vector<Tensor> inputs;
  bool all_concrete = true;
  for (const auto& name : node.input()) {
    if (name.empty()) {
      inputs.emplace_back();
      continue;
    }
    auto it = values.find(name);
    if (it == values.end()) {
      throw Error("onnx: node '" + clip(node.name()) + "' (" + clip(node.op_type()) + ") reads '" + clip(name) +
                  "', which no earlier node, graph input or initializer defines");
    }
    inputs.push_back(it->second);
    all_concrete = all_concrete && is_concrete(it->second);
  }
  NodeContext ctx(node, opset, std::move(inputs), model_dir);
  // A custom domain's node is a user-defined op that claims it (smelt/custom_op.h), or unsupported.
  const bool custom_domain = !node.domain().empty() && node.domain() != "ai.onnx";
  ops::OpId registered;
  Converter custom;
  if (custom_domain) {
    if (!ops::custom_op_for_onnx(node.domain(), node.op_type(), &registered)) {
      ctx.unsupported("op " + clip(node.op_type()) + " of domain '" + clip(node.domain()) +
                      "' is not supported: no user-defined op claims it (register one with "
                      "smelt::register_op, OpDefinition::onnx_domain = \"" + clip(node.domain()) + "\")");
    }
    custom = [registered](NodeContext& c) { return convert_registered_op(c, registered); };
  } else if (opset < 1) {
    ctx.invalid("the model imports no version of the default opset (ai.onnx)");
  }
  const Converter* convert = custom_domain ? &custom : find_converter(node.op_type());
  if (!convert) ctx.unsupported("op " + clip(node.op_type()) + " is not supported");
  std::vector<Tensor> outs;
  try {
    std::optional<EagerScope> eager;
    if (all_concrete) eager.emplace();
    outs = (*convert)(ctx);
    ctx.check_all_attrs_read();
    // A weight's quantized form (see the top of this file).
    if (all_concrete && node.op_type() == "DequantizeLinear" && node.domain().empty() && !outs.empty() &&
        !dtype_is_floating(ctx.input(0).dtype())) {
      const Tensor& q = ctx.input(0);
      const Tensor& scale = ctx.input(1);
      const int64_t axis = scale.numel() == 1 ? 1 : normalize_axis(ctx, ctx.attr_int("axis", 1), q.dim());
      weights.push_back({outs[0], q, scale, ctx.has_input(2) ? ctx.input(2) : zeros({}, q.dtype()), axis});
    }
  } catch (const onnx::Unsupported&) {
    throw;
  } catch (const Error& e) {
    const std::string w = ctx.where();
    if (std::string(e.what()).rfind(w, 0) == 0) throw;
    throw Error(w + ": " + e.what(), e.internal());
  } catch (const std::exception& e) {
    // A converter that let a library exception through (an unchecked index): a smelt bug, but
    // still a clear error naming the node, never a terminate.
    throw Error(ctx.where() + ": " + e.what(), true);
  }
  for (int k = 0; k < node.output_size(); ++k) {
    const std::string& name = node.output(k);
    if (name.empty()) continue;
    if (size_t(k) >= outs.size() || !outs[size_t(k)].defined()) {
      ctx.unsupported("output " + std::to_string(k) + " ('" + clip(name) + "') is not supported");
    }
    if (values.count(name)) ctx.invalid("output '" + clip(name) + "' is already defined (ONNX graphs are SSA)");
    values[name] = outs[size_t(k)];
  }
}

onnx::Model import_proto(const ::onnx::ModelProto& m, const std::string& model_dir, const onnx::ImportOptions& options) {
  const int64_t opset = default_opset(m);
  const ::onnx::GraphProto& g = m.graph();
  Prepared p = prepare(g, model_dir, options);
  std::vector<std::string> output_names;
  for (const auto& o : g.output()) output_names.push_back(o.name());
  SMELT_CHECK(!output_names.empty()) << "onnx: the graph has no outputs";

  std::vector<DequantizedWeight> weights;
  auto fn = [&](const std::vector<Tensor>& inputs, const std::vector<Tensor>& params) {
    std::unordered_map<std::string, Tensor> values = p.constants;
    for (size_t i = 0; i < inputs.size(); ++i) values[p.input_names[i]] = inputs[i];
    for (size_t i = 0; i < params.size(); ++i) values[p.param_names[i]] = params[i];
    for (const auto& node : g.node()) convert_node(node, opset, model_dir, values, weights);
    std::vector<Tensor> outs;
    for (const auto& name : output_names) {
      auto it = values.find(name);
      SMELT_CHECK(it != values.end()) << "onnx: graph output '" << clip(name) << "' is never computed";
      outs.push_back(it->second);
    }
    return outs;
  };
  std::unique_ptr<ir::Graph> graph = trace::trace(fn, p.examples, p.params);
  restore_quantized_weights(*graph, weights);
  return onnx::Model{Graph(std::move(graph)), p.input_names, p.param_names, p.params, output_names};
}

}  // namespace
}  // namespace smelt::onnx_import

namespace smelt::onnx {

ModelInfo inspect(const std::string& path) {
  const ::onnx::ModelProto m =
      onnx_import::parse_model(onnx_import::read_file_bytes(path, onnx_import::kMaxModelBytes), "'" + path + "'");
  ModelInfo info;
  info.ir_version = m.ir_version();
  for (const auto& o : m.opset_import()) info.opsets[o.domain()] = o.version();
  info.producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& v : m.graph().input()) {
    if (!inits.count(v.name())) info.inputs.push_back(onnx_import::value_info(v));
  }
  for (const auto& v : m.graph().output()) info.outputs.push_back(onnx_import::value_info(v));
  info.num_nodes = size_t(m.graph().node_size());
  info.num_initializers = inits.size();
  return info;
}

Model import_model(const std::string& path, const ImportOptions& options) {
  const ::onnx::ModelProto m =
      onnx_import::parse_model(onnx_import::read_file_bytes(path, onnx_import::kMaxModelBytes), "'" + path + "'");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return onnx_import::import_proto(m, dir, options);
}

Model import_model_bytes(const std::string& bytes, const ImportOptions& options) {
  return onnx_import::import_proto(onnx_import::parse_model(bytes, "model bytes"), "", options);
}

Tensor read_tensor_file(const std::string& path, std::string* name) {
  const std::string bytes = onnx_import::read_file_bytes(path, onnx_import::kMaxModelBytes);
  ::onnx::TensorProto p;
  SMELT_CHECK(p.ParseFromString(bytes)) << "onnx: '" << path << "' is not a valid TensorProto";
  if (name) *name = p.name();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return onnx_import::tensor_from_proto(p, dir.empty() ? "." : dir, "'" + path + "'");
}

void write_tensor_file(const std::string& path, const Tensor& t, const std::string& name) {
  const ::onnx::TensorProto p = onnx_import::tensor_to_proto(t, name);
  std::ofstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "onnx: cannot write '" << path << "'";
  SMELT_CHECK(p.SerializeToOstream(&f)) << "onnx: writing '" << path << "' failed";
}

}  // namespace smelt::onnx
