// smelt graph -> ONNX model. The walk follows the IR's node order (already topological): graph
// inputs become ONNX inputs (or initializers, for bound params), constants initializers, each node
// its family's ONNX nodes (the table below), group nodes their bodies inlined. Graph outputs get
// their names up front, so the node computing one writes it directly; an output that is an input,
// a constant or a repeat of another output goes through an Identity.
#include <filesystem>
#include <set>
#include <unordered_map>

#include "io/atomic_file.h"
#include "onnx/export_builder.h"
#include "ops/custom_ops.h"
#include "trace/custom_expression.h"
#include "smelt/nn.h"
#include "trace/trace_module.h"

namespace smelt::onnx_export {
namespace {

using ops::OpId;
using Exporter = void (*)(NodeExport&);

// The op table's ONNX column: the family that exports each op, or why none can. No default case,
// so a new row in ops.def is a compiler warning here until it gets its entry.
Exporter exporter_of(OpId op, const char** why_not) {
  switch (op) {
    case OpId::neg: case OpId::exp: case OpId::log: case OpId::sqrt: case OpId::rsqrt: case OpId::abs:
    case OpId::sign: case OpId::erf: case OpId::relu: case OpId::leaky_relu: case OpId::sigmoid:
    case OpId::tanh: case OpId::gelu: case OpId::silu: case OpId::softplus: case OpId::clamp: case OpId::cast:
    case OpId::floor: case OpId::ceil: case OpId::round: case OpId::sin: case OpId::cos: case OpId::tan:
    case OpId::asin: case OpId::acos: case OpId::atan: case OpId::sinh: case OpId::cosh: case OpId::asinh:
    case OpId::acosh: case OpId::atanh: case OpId::add: case OpId::sub: case OpId::mul: case OpId::div:
    case OpId::pow: case OpId::maximum: case OpId::minimum: case OpId::eq: case OpId::ne: case OpId::lt:
    case OpId::le: case OpId::gt: case OpId::ge: case OpId::where:
      return export_elementwise;
    case OpId::sum: case OpId::mean: case OpId::amax: case OpId::amin: case OpId::prod: case OpId::var:
    case OpId::argmax: case OpId::softmax: case OpId::log_softmax: case OpId::nll_loss: case OpId::cumsum:
    case OpId::topk:
      return export_reduce;
    case OpId::matmul: case OpId::conv2d: case OpId::conv2d_grad_input: case OpId::conv2d_grad_weight:
    case OpId::max_pool2d: case OpId::avg_pool2d: case OpId::adaptive_avg_pool2d: case OpId::layer_norm:
    case OpId::batch_norm: case OpId::dropout:
      return export_nn;
    case OpId::embedding: case OpId::index_select: case OpId::index_add: case OpId::gather:
    case OpId::scatter_add: case OpId::one_hot: case OpId::cat: case OpId::reshape: case OpId::permute:
    case OpId::slice: case OpId::slice_grad: case OpId::expand: case OpId::contiguous:
      return export_movement;
    case OpId::quantize_linear: case OpId::dequantize_linear: case OpId::qlinear_matmul:
    case OpId::matmul_integer: case OpId::qlinear_conv2d: case OpId::conv2d_integer:
      return export_quantize;
    case OpId::max_pool2d_grad:
      *why_not = "a max-pool gradient (scatter of dy at per-plane indices) has no ONNX op";
      return nullptr;
    case OpId::avg_pool2d_grad:
    case OpId::adaptive_avg_pool2d_grad:
      *why_not = "a pooling gradient has no ONNX op";
      return nullptr;
    case OpId::conv2d_blocked:
    case OpId::to_blocked:
    case OpId::from_blocked:
    case OpId::max_pool2d_blocked:
      *why_not = "the blocked channel layout of compiled plans (passes/blocked_layout.h) has no ONNX form; export "
                 "the graph before the blocked_layout pass, or with SMELT_BLOCKED_LAYOUT=0";
      return nullptr;
    case OpId::group:
      return nullptr;  // inlined by the walk
  }
  if (const ops::CustomOpRecord* custom = ops::custom_op(op)) {
    if (!custom->def.onnx_domain.empty()) return export_custom;
    *why_not = "a user-defined op without an ONNX domain or an expression (set OpDefinition::onnx_domain to "
               "export it as a node of that domain, or give it an expression in smelt ops)";
    return nullptr;
  }
  *why_not = "unknown op";
  return nullptr;
}

::onnx::ValueInfoProto value_info(const std::string& name, const ops::TensorMeta& meta) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_import::dtype_to_onnx(meta.dtype));
  auto* shape = tt->mutable_shape();
  for (int64_t d : meta.shape) shape->add_dim()->set_dim_value(d);
  return v;
}

class GraphWriter {
 public:
  GraphWriter(::onnx::GraphProto* g, int64_t opset, bool qdq) : g_(g), b_(g, opset, qdq) {}

  void write(const ir::Graph& graph, const onnx::ExportOptions& options) {
    const auto& inputs = graph.inputs();
    SMELT_CHECK(options.params.size() <= inputs.size())
        << "onnx export: " << options.params.size() << " param values given, the graph has only " << inputs.size()
        << " inputs";
    const size_t first_param = inputs.size() - options.params.size();
    SMELT_CHECK(options.input_names.empty() || options.input_names.size() == first_param)
        << "onnx export: " << options.input_names.size() << " input names given, the model has " << first_param
        << " inputs (the graph's " << inputs.size() << " less " << options.params.size() << " bound params)";
    SMELT_CHECK(options.output_names.empty() || options.output_names.size() == graph.outputs().size())
        << "onnx export: " << options.output_names.size() << " output names given, the graph has "
        << graph.outputs().size() << " outputs";
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ir::Value* v = inputs[i];
      if (i < first_param) {
        const std::string want = !options.input_names.empty() ? options.input_names[i]
                                 : !v->name.empty()          ? v->name
                                                             : "input_" + std::to_string(i);
        names_[v] = b_.fresh(want);
        SMELT_CHECK(options.input_names.empty() || names_[v] == want)
            << "onnx export: input name '" << want << "' is given twice or is not a valid ONNX name";
        *g_->add_input() = value_info(names_[v], v->meta);
        continue;
      }
      const Tensor& t = options.params[i - first_param];
      SMELT_CHECK(t.defined() && t.shape() == v->meta.shape && t.dtype() == v->meta.dtype)
          << "onnx export: param value " << i - first_param << " is "
          << (t.defined() ? dtype_name(t.dtype()) + std::string(" ") + shape_str(t.shape()) : std::string("undefined"))
          << ", graph input " << i << " is " << dtype_name(v->meta.dtype) << " " << shape_str(v->meta.shape);
      names_[v] = b_.tensor(t, v->name.empty() ? "param_" + std::to_string(i - first_param) : v->name);
    }
    // Output names first: the node computing an output writes it under its final name.
    const auto& outs = graph.outputs();
    std::vector<std::string> out_names;
    for (size_t k = 0; k < outs.size(); ++k) {
      const std::string want = options.output_names.empty() ? "output_" + std::to_string(k) : options.output_names[k];
      out_names.push_back(b_.fresh(want));
      SMELT_CHECK(out_names.back() == want || options.output_names.empty())
          << "onnx export: output name '" << want << "' is given twice, names an input, or is not a valid ONNX name";
      if (outs[k]->kind == ir::ValueKind::Computed && !names_.count(outs[k])) names_[outs[k]] = out_names[k];
    }
    walk(graph);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (name_of(outs[k]) != out_names[k]) b_.node("Identity", {name_of(outs[k])}, {out_names[k]});
      *g_->add_output() = value_info(out_names[k], outs[k]->meta);
    }
  }

 private:
  const std::string& name_of(const ir::Value* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    SMELT_INTERNAL_CHECK(v->kind == ir::ValueKind::Constant) << "onnx export: value %" << v->id << " has no name";
    return names_[v] = b_.tensor(v->constant, "const_" + std::to_string(v->id));
  }

  void walk(const ir::Graph& graph) {
    for (const auto& node : graph.nodes()) {
      if (node->is_group()) {
        inline_body(*node, *node->body);
        continue;
      }
      // A user-defined op that claims no ONNX domain but has an expression (the marker of
      // apply_function too) is written as the expression's ops.
      const ops::CustomOpRecord* custom = ops::custom_op(node->op);
      if (custom && custom->def.onnx_domain.empty() && custom->def.expression) {
        expressions_.push_back(trace::trace_custom_expression(*custom, *node));
        inline_body(*node, *expressions_.back());
        continue;
      }
      NodeExport e{*node, b_, {}, {}, {}};
      for (const ir::Value* v : node->inputs) e.in.push_back(name_of(v));
      for (const ir::Value* v : node->outputs) {
        auto it = names_.find(v);
        std::string name;
        if (it != names_.end()) {
          name = it->second;
        } else {
          name = "v";  // %12 -> v12 (appended: GCC 12 misreads "v" + string as an overlapping copy)
          name += std::to_string(v->id);
          name = b_.fresh(name);
        }
        names_[v] = name;
        e.out.push_back(name);
        e.out_used.push_back(!v->is_dead());
      }
      const char* why_not = "";
      Exporter fn = exporter_of(node->op, &why_not);
      if (!fn) e.fail(std::string("no ONNX form: ") + why_not);
      fn(e);
    }
  }

  // A body (a group's, an expression's) runs on the node's inputs: its nodes are written in place.
  void inline_body(const ir::Node& node, const ir::Graph& body) {
    for (size_t i = 0; i < body.inputs().size(); ++i) names_[body.inputs()[i]] = name_of(node.inputs[i]);
    walk(body);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const std::string& inner = name_of(body.outputs()[k]);
      auto it = names_.find(node.outputs[k]);
      if (it == names_.end()) names_[node.outputs[k]] = inner;
      else if (it->second != inner) b_.node("Identity", {inner}, {it->second});  // a graph output
    }
  }

  ::onnx::GraphProto* g_;
  Builder b_;
  std::unordered_map<const ir::Value*, std::string> names_;
  std::vector<std::unique_ptr<ir::Graph>> expressions_;  // alive while names_ holds their values
};

// IR version per opset: 7 for opset 13 (ONNX 1.8), 8 for 14 to 18 (ONNX 1.9 to 1.13).
int64_t ir_version_of(int64_t opset) { return opset <= 13 ? 7 : 8; }

::onnx::ModelProto build_model(const Graph& graph, const onnx::ExportOptions& options) {
  SMELT_CHECK(options.opset >= 13 && options.opset <= 18)
      << "onnx export: opset " << options.opset << " is not supported; valid: 13 to 18";
  ::onnx::ModelProto m;
  m.set_ir_version(ir_version_of(options.opset));
  m.set_producer_name("smelt");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name(options.graph_name);
  GraphWriter(g, options.opset, options.quantized_as_qdq).write(graph.ir_graph(), options);
  std::set<std::string> custom_domains;  // of user-defined ops (export_custom.cpp)
  for (const auto& n : g->node()) {
    if (!n.domain().empty()) custom_domains.insert(n.domain());
  }
  for (const std::string& domain : custom_domains) {
    auto* custom = m.add_opset_import();
    custom->set_domain(domain);
    custom->set_version(1);
  }
  return m;
}

std::string serialize(const ::onnx::ModelProto& m, const std::string& what) {
  std::string bytes;
  SMELT_CHECK(m.ByteSizeLong() < (size_t(1) << 31) && m.SerializeToString(&bytes))
      << "onnx export: " << what << " exceeds protobuf's 2 GiB limit; use external data";
  return bytes;
}

// Moves initializers of at least `min_bytes` into `data` (appended), leaving references.
void externalize(::onnx::ModelProto& m, const std::string& location, int64_t min_bytes, std::string& data) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (int64_t(t.raw_data().size()) < min_bytes) continue;
    data.resize((data.size() + 63) / 64 * 64, '\0');  // aligned, so a runtime may map it
    const size_t offset = data.size();
    data += t.raw_data();
    t.clear_raw_data();
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(data.size() - offset));
  }
}

void write_atomic(const std::string& path, const std::string& bytes) {
  io::AtomicFileWriter w(path);
  w.write(bytes.data(), bytes.size());
  w.commit();
}

}  // namespace
}  // namespace smelt::onnx_export

namespace smelt::onnx {

std::string save_bytes(const Graph& graph, const ExportOptions& options) {
  SMELT_CHECK(!options.external_data) << "onnx export: external data needs a file (save), not bytes";
  return onnx_export::serialize(onnx_export::build_model(graph, options), "the model");
}

void save(const Graph& graph, const std::string& path, const ExportOptions& options) {
  ::onnx::ModelProto m = onnx_export::build_model(graph, options);
  if (options.external_data) {
    const std::string location = std::filesystem::path(path).filename().string() + ".data";
    std::string data;
    onnx_export::externalize(m, location, std::max<int64_t>(options.external_data_min_bytes, 1), data);
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    onnx_export::write_atomic((dir / location).string(), data);
  }
  onnx_export::write_atomic(path, onnx_export::serialize(m, "'" + path + "'"));
}

void save_module(nn::Module& module, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                 const std::vector<Tensor>& example_inputs, const std::string& path, const ExportOptions& options) {
  trace::ModuleGraph mg = trace::trace_module(module, fn, example_inputs);
  SMELT_CHECK(!mg.random) << "onnx export: the module draws random numbers (dropout in training mode), which ONNX "
                             "cannot reproduce; call eval() before exporting";
  SMELT_CHECK(options.params.empty()) << "onnx export: save_module binds the module's own parameters; give no params";
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : module.named_buffers()) state[name] = t;
  for (auto& [name, t] : module.named_parameters()) state[name] = t;
  ExportOptions o = options;
  for (const auto* names : {&mg.buffers, &mg.params}) {
    for (const std::string& name : *names) o.params.push_back(state.at(name).detach());
  }
  // Tensors the forward captured beside the module's state (inputs after the parameters, as the
  // trace orders them): initializers too. (Found in review: the bindings shifted by their count.)
  for (const Tensor& t : mg.captured) o.params.push_back(t.detach());
  // Training mode's updated buffers leave the graph as extra outputs: not part of the model.
  std::vector<ir::Value*> outs = mg.graph->outputs();
  outs.resize(mg.num_outputs);
  mg.graph->set_outputs(outs);
  save(Graph(std::move(mg.graph)), path, o);
}

}  // namespace smelt::onnx
