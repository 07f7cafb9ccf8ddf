// Numbers print exactly: integers in decimal; floats as the shortest decimal that reads back to
// the same bits (std::to_chars), `inf`, `-inf`, `-0`; NaN as `nan` when it is the default quiet
// NaN (0x7fc00000 in f32, 0x7ff8000000000000 in f64) and otherwise as `nan:0x<bits>` with all of
// the element's bits in hex (sign and payload kept), e.g. `nan:0xffc00001`.
#include <cctype>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ir/constant.h"
#include "ir/printer.h"

namespace smelt::ir {
namespace {

template <class F, class Bits>
std::string float_element_str(F v, Bits default_nan) {
  char buf[64];
  if (std::isnan(v)) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof v);
    if (bits == default_nan) return "nan";
    std::snprintf(buf, sizeof buf, "nan:0x%0*" PRIx64, int(2 * sizeof(Bits)), uint64_t(bits));
    return buf;
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string element_str(const char* p, DType t) {
  switch (t) {
    case DType::Float32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return float_element_str(f, uint32_t(0x7fc00000u));
    }
    case DType::Float64: {
      double d;
      std::memcpy(&d, p, sizeof d);
      return float_element_str(d, uint64_t(0x7ff8000000000000ull));
    }
    case DType::Int64: {
      int64_t i;
      std::memcpy(&i, p, sizeof i);
      return std::to_string(i);
    }
    case DType::Bool: return *p ? "1" : "0";
    case DType::UInt8: return std::to_string(unsigned(static_cast<unsigned char>(*p)));
    case DType::Int8: return std::to_string(int(static_cast<signed char>(*p)));
    case DType::Int32: {
      int32_t i;
      std::memcpy(&i, p, sizeof i);
      return std::to_string(i);
    }
  }
  return "?";
}

void print_constant(std::ostringstream& os, const Value* v) {
  const std::string bytes = constant_bytes(v->constant);
  const size_t size = dtype_size(v->meta.dtype);
  if (v->meta.shape.empty()) {
    os << element_str(bytes.data(), v->meta.dtype);
    return;
  }
  os << "[";
  for (size_t off = 0; off < bytes.size(); off += size) {
    os << (off ? ", " : "") << element_str(bytes.data() + off, v->meta.dtype);
  }
  os << "]";
}

void print_graph(std::ostringstream& os, const Graph& g, const std::string& indent, const PrintOptions& options) {
  os << "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    os << (i ? ", " : "") << value_ref(v) << ": " << meta_str(v->meta);
    if (v->kind == ValueKind::Param) os << " param";
  }
  os << ") {\n";
  for (const Value* c : g.constants()) {
    os << indent << "  " << value_ref(c) << ": " << meta_str(c->meta) << " = constant ";
    const size_t elements = size_t(c->constant.numel());
    if (elements > options.max_constant_elements) {
      os << "<" << elements << " values not shown>\n";
      continue;
    }
    print_constant(os, c);
    os << "\n";
  }
  for (const auto& n : g.nodes()) {
    os << indent << "  ";
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
    if (n->body) {
      os << " ";
      print_graph(os, *n->body, indent + "  ", options);
    }
    os << "\n";
  }
  os << indent << "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : " ") << value_ref(g.outputs()[i]);
  // Which outputs are new values of inputs (Graph::set_output_updates), as a comment: the text
  // format reads back the pure graph.
  for (const auto& [o, i] : g.updates())
    os << "\n" << indent << "  # output " << o << " updates " << value_ref(g.inputs()[i]);
  os << "\n" << indent << "}";
}

}  // namespace

// A name prints only when it reads back as the same name: word characters and '.', not all
// digits (that would read as an id); otherwise the value prints by id.
bool printable_name(const std::string& name) {
  if (name.empty() || name.find_first_not_of("0123456789") == std::string::npos) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  }
  return true;
}

std::string value_ref(const Value* v) {
  return "%" + (printable_name(v->name) ? v->name : std::to_string(v->id));
}

std::string node_ref(const Node& n) {
  return (n.outputs.empty() ? std::string("?") : value_ref(n.outputs[0])) + " = " + n.name();
}

std::string meta_str(const ops::TensorMeta& m) {
  std::string s = ops::dtype_short_name(m.dtype);
  s += "[";
  for (size_t i = 0; i < m.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(m.shape[i]);
  }
  return s + "]";
}

std::string print(const Graph& g) { return print(g, PrintOptions{}); }

std::string print(const Graph& g, const PrintOptions& options) {
  std::ostringstream os;
  print_graph(os, g, "", options);
  os << "\n";
  return os.str();
}

}  // namespace smelt::ir
