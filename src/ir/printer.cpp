#include <cstdio>
#include <sstream>

#include "ir/printer.h"

namespace smelt::ir {
namespace {

const char* short_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Int64: return "i64";
    case DType::Bool: return "bool";
    case DType::UInt8: return "u8";
  }
  return "?";
}

// Exact text for each element: enough digits that parsing gives back the same bits.
std::string element_str(double v, DType t) {
  char buf[40];
  if (t == DType::Float32) std::snprintf(buf, sizeof buf, "%.9g", v);
  else if (t == DType::Float64) std::snprintf(buf, sizeof buf, "%.17g", v);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

void print_constant(std::ostringstream& os, const Value* v) {
  std::vector<double> data = v->constant.to_vector();
  if (v->meta.shape.empty()) {
    os << element_str(data[0], v->meta.dtype);
    return;
  }
  os << "[";
  for (size_t i = 0; i < data.size(); ++i) os << (i ? ", " : "") << element_str(data[i], v->meta.dtype);
  os << "]";
}

}  // namespace

std::string value_ref(const Value* v) { return "%" + (v->name.empty() ? std::to_string(v->id) : v->name); }

std::string meta_str(const ops::TensorMeta& m) {
  std::string s = short_dtype(m.dtype);
  s += "[";
  for (size_t i = 0; i < m.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(m.shape[i]);
  }
  return s + "]";
}

std::string print(const Graph& g) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    os << (i ? ", " : "") << value_ref(v) << ": " << meta_str(v->meta);
    if (v->kind == ValueKind::Param) os << " param";
  }
  os << ") {\n";
  for (const Value* c : g.constants()) {
    os << "  " << value_ref(c) << ": " << meta_str(c->meta) << " = constant ";
    print_constant(os, c);
    os << "\n";
  }
  for (const auto& n : g.nodes()) {
    os << "  ";
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      os << (k ? ", " : "") << value_ref(n->outputs[k]) << ": " << meta_str(n->outputs[k]->meta);
    }
    os << " = " << n->name() << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) os << (i ? ", " : "") << value_ref(n->inputs[i]);
    os << ")";
    if (!n->attrs.items().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [key, value] : n->attrs.items()) {
        os << (first ? "" : ", ") << key << "=" << ops::attr_value_str(value);
        first = false;
      }
      os << "}";
    }
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : " ") << value_ref(g.outputs()[i]);
  os << "\n}\n";
  return os.str();
}

}  // namespace smelt::ir
