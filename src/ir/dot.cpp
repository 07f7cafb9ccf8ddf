#include "ir/dot.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "ir/printer.h"

namespace smelt::ir {
namespace {

// Constants with at most this many elements show their values.
constexpr int64_t kMaxShownElements = 4;

// A DOT double-quoted string: quotes and backslashes escaped, lines joined with "\n".
std::string quoted(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s + "\"";
}

// Concatenation through a stream (GCC 12 warns falsely on `"literal" + std::string`).
template <class... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

std::string lines(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!s.empty()) s += '\n';
    s += p;
  }
  return s;
}

std::string constant_label(const Value* c) {
  std::string label = lines({value_ref(c), meta_str(c->meta)});
  if (c->constant.numel() > kMaxShownElements) return label;
  std::ostringstream values;
  std::vector<double> data = c->constant.to_vector();
  if (!c->meta.shape.empty()) values << "[";
  for (size_t i = 0; i < data.size(); ++i) values << (i ? ", " : "") << data[i];
  if (!c->meta.shape.empty()) values << "]";
  return lines({label, str("= ", values.str())});
}

std::string node_label(const Node& n) {
  std::ostringstream label;
  label << n.name();
  for (const auto& [key, value] : n.attrs.items()) label << "\n" << key << "=" << ops::attr_value_str(value);
  for (const Value* out : n.outputs) label << "\n" << value_ref(out) << ": " << meta_str(out->meta);
  return label.str();
}

// A fusion group (fusion/fuse.h) is labeled with its pattern and filled with a color per
// pattern; another group node is a dashed box with its attributes.
std::string group_label(const Node& n) {
  if (!n.attrs.has("fusion")) return node_label(n);
  std::ostringstream label;
  label << "fused: " << n.attrs.get_string("fusion");
  for (const Value* out : n.outputs) label << "\n" << value_ref(out) << ": " << meta_str(out->meta);
  return label.str();
}

std::string group_style(const Node& n) {
  if (!n.attrs.has("fusion")) return "\"rounded,dashed\"";
  const std::string& p = n.attrs.get_string("fusion");
  const char* color = p == "pointwise" ? "#e8f5e9" : p == "reduction" ? "#fff3e0" : p == "row" ? "#f3e5f5" : "#e3f2fd";
  return str("\"rounded,filled\", fillcolor=\"", color, "\"");
}

// Draws the inputs, constants and nodes of `g` with DOT ids starting with `prefix`; returns
// where each of its values comes from. A group node becomes a cluster holding its body, whose
// inputs are fed by the node's operands and whose outputs stand for the node's outputs.
std::unordered_map<const Value*, std::string> draw_graph(std::ostringstream& os, const Graph& g,
                                                         const std::string& prefix,
                                                         const std::string& indent) {
  std::unordered_map<const Value*, std::string> source;
  for (const Value* v : g.inputs()) {
    std::string id = str(prefix, "v", v->id);
    source[v] = id;
    bool param = v->kind == ValueKind::Param;
    os << indent << id << " [label=" << quoted(lines({value_ref(v), meta_str(v->meta), param ? "param" : ""}))
       << ", shape=ellipse, style=filled, fillcolor=" << (param ? "\"#ffe0b2\"" : "\"#cfe3ff\"") << "];\n";
  }
  for (const Value* c : g.constants()) {
    std::string id = str(prefix, "v", c->id);
    source[c] = id;
    os << indent << id << " [label=" << quoted(constant_label(c))
       << ", shape=note, style=filled, fillcolor=\"#eeeeee\"];\n";
  }
  auto edge_label = [](const Value* in) {
    std::string label = meta_str(in->meta);
    if (in->producer && in->producer->outputs.size() > 1) label = str("#", in->output_index, " ", label);
    return label;
  };
  int index = 0;
  for (const auto& n : g.nodes()) {
    std::string id = str(prefix, "n", index++);
    if (n->body) {
      os << indent << "subgraph " << quoted(str("cluster_", id)) << " {\n";
      os << indent << "  label=" << quoted(group_label(*n)) << "; style=" << group_style(*n) << ";\n";
      auto inner = draw_graph(os, *n->body, id + "_", indent + "  ");
      os << indent << "}\n";
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        os << indent << source.at(n->inputs[i]) << " -> " << inner.at(n->body->inputs()[i])
           << " [label=" << quoted(edge_label(n->inputs[i])) << "];\n";
      }
      for (size_t k = 0; k < n->outputs.size(); ++k) source[n->outputs[k]] = inner.at(n->body->outputs()[k]);
      continue;
    }
    for (const Value* out : n->outputs) source[out] = id;
    os << indent << id << " [label=" << quoted(node_label(*n)) << ", shape=box, style=\"rounded,filled\", fillcolor=white];\n";
    for (const Value* in : n->inputs) {
      os << indent << source.at(in) << " -> " << id << " [label=" << quoted(edge_label(in)) << "];\n";
    }
  }
  return source;
}

}  // namespace

std::string to_dot(const Graph& g, const std::string& title) {
  std::ostringstream os;
  os << "digraph " << quoted(title) << " {\n";
  os << "  node [fontname=\"Helvetica\", fontsize=10];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  auto source = draw_graph(os, g, "", "  ");
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    std::string id = str("out", i);
    os << "  " << id << " [label=" << quoted(lines({str("return ", i), meta_str(v->meta)}))
       << ", shape=octagon, style=filled, fillcolor=\"#c8e6c9\"];\n";
    os << "  " << source.at(v) << " -> " << id << " [label=" << quoted(value_ref(v)) << "];\n";
  }
  os << "}\n";
  return os.str();
}

bool graphviz_available() { return std::system("dot -V >/dev/null 2>&1") == 0; }

void write_dot(const std::string& dot_text, const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  SMELT_CHECK(ext == ".dot" || ext == ".svg" || ext == ".png" || ext == ".pdf")
      << "cannot write a graph picture to '" << path << "': the extension must be .dot, .svg, .png or .pdf";
  std::string dot_path = ext == ".dot" ? path : path + ".dot";
  {
    std::ofstream f(dot_path);
    SMELT_CHECK(f.good()) << "cannot write '" << dot_path << "'";
    f << dot_text;
    SMELT_CHECK(f.good()) << "cannot write '" << dot_path << "'";
  }
  if (ext == ".dot") return;
  if (!graphviz_available()) {
    std::filesystem::remove(dot_path);
    SMELT_CHECK(false) << "rendering '" << path << "' needs Graphviz's 'dot' program, which is not installed "
                       << "(apt-get install graphviz), or write the text with a .dot path";
  }
  // Paths go in single quotes; a quote inside one is closed, escaped and reopened.
  auto shell_quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string command = "dot -T" + ext.substr(1) + " -o " + shell_quote(path) + " " + shell_quote(dot_path);
  int status = std::system(command.c_str());
  std::filesystem::remove(dot_path);
  SMELT_CHECK(status == 0) << "Graphviz failed to render '" << path << "' (" << command << ")";
}

}  // namespace smelt::ir
