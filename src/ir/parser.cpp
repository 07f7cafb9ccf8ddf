// Recursive-descent parser for the text IR (grammar in printer.h's example):
//   graph   := 'graph' '(' [param {',' param}] ')' '{' {stmt} 'return' [ref {',' ref}] '}'
//   param   := ref ':' meta ['param']
//   stmt    := ref ':' meta {',' ref ':' meta} '=' ( 'constant' literal | op '(' refs ')' [attrs] )
//   meta    := dtype '[' [int {',' int}] ']'
//   attrs   := '{' name '=' value {',' name '=' value} '}'
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "ir/printer.h"
#include "smelt/creation.h"

namespace smelt::ir {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  std::unique_ptr<Graph> parse_graph() {
    graph_ = std::make_unique<Graph>();
    expect_word("graph");
    expect('(');
    if (!peek(')')) {
      do parse_param(); while (accept(','));
    }
    expect(')');
    expect('{');
    while (!peek_word("return")) parse_stmt();
    expect_word("return");
    skip_space();
    if (peek('%')) {
      do graph_->add_output(lookup(parse_ref())); while (accept(','));
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    assign_ids();
    return std::move(graph_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    SMELT_CHECK(false) << "IR parse error at line " << line << ", column " << col << ": " << what;
    std::abort();
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) { ++pos_; continue; }
      if (text_[pos_] == '#') {  // comment to end of line
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
        continue;
      }
      break;
    }
  }
  bool peek(char c) { skip_space(); return pos_ < text_.size() && text_[pos_] == c; }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string word() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  bool peek_word(const std::string& w) {
    size_t save = pos_;
    bool ok = word() == w;
    pos_ = save;
    return ok;
  }
  void expect_word(const std::string& w) {
    size_t save = pos_;
    if (word() != w) { pos_ = save; skip_space(); fail("expected '" + w + "'"); }
  }
  int64_t parse_int() {
    skip_space();
    char* end = nullptr;
    long long v = std::strtoll(text_.c_str() + pos_, &end, 10);
    if (end == text_.c_str() + pos_) fail("expected an integer");
    pos_ = size_t(end - text_.c_str());
    return v;
  }
  // A number; `is_float` says whether it was written as a float.
  double parse_number(bool* is_float) {
    skip_space();
    const char* start = text_.c_str() + pos_;
    char* end = nullptr;
    double v = std::strtod(start, &end);
    if (end == start) fail("expected a number");
    std::string tok(start, size_t(end - start));
    *is_float = tok.find_first_of(".eEnN") != std::string::npos;
    pos_ += tok.size();
    return v;
  }
  std::string parse_ref() {
    expect('%');
    std::string name = word();
    if (name.empty()) fail("expected a value name after '%'");
    return name;
  }
  ops::TensorMeta parse_meta() {
    std::string dt = word();
    ops::TensorMeta m;
    if (dt == "f32") m.dtype = DType::Float32;
    else if (dt == "f64") m.dtype = DType::Float64;
    else if (dt == "i64") m.dtype = DType::Int64;
    else if (dt == "bool") m.dtype = DType::Bool;
    else if (dt == "u8") m.dtype = DType::UInt8;
    else fail("unknown dtype '" + dt + "'; valid: f32, f64, i64, bool, u8");
    expect('[');
    if (!peek(']')) {
      do {
        int64_t d = parse_int();
        if (d < 0) fail("negative dim in a shape");
        m.shape.push_back(d);
      } while (accept(','));
    }
    expect(']');
    return m;
  }
  Value* lookup(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) fail("use of undefined value %" + name);
    return it->second;
  }
  void define(const std::string& name, Value* v) {
    if (!values_.emplace(name, v).second) fail("value %" + name + " is defined twice");
    order_.emplace_back(name, v);
  }

  void parse_param() {
    std::string name = parse_ref();
    expect(':');
    ops::TensorMeta m = parse_meta();
    ValueKind kind = ValueKind::Input;
    if (peek_word("param")) { word(); kind = ValueKind::Param; }
    define(name, graph_->add_input(m, "", kind));
  }

  void parse_stmt() {
    std::vector<std::pair<std::string, ops::TensorMeta>> defs;
    do {
      std::string name = parse_ref();
      expect(':');
      defs.emplace_back(name, parse_meta());
    } while (accept(','));
    expect('=');
    size_t op_pos = (skip_space(), pos_);
    std::string op = word();
    if (op == "constant") {
      if (defs.size() != 1) fail("a constant defines exactly one value");
      define(defs[0].first, graph_->add_constant(parse_literal(defs[0].second)));
      return;
    }
    ops::OpId id;
    if (!ops::op_from_name(op, &id)) { pos_ = op_pos; fail("unknown op '" + op + "'"); }
    expect('(');
    std::vector<Value*> inputs;
    if (!peek(')')) {
      do inputs.push_back(lookup(parse_ref())); while (accept(','));
    }
    expect(')');
    ops::Attrs attrs;
    if (accept('{')) {
      do {
        std::string key = word();
        if (key.empty()) fail("expected an attribute name");
        expect('=');
        attrs.set(key, parse_attr_value());
      } while (accept(','));
      expect('}');
    }
    Node* node;
    try {
      node = graph_->add_node(id, inputs, attrs);
    } catch (const Error& e) {
      pos_ = op_pos;
      fail(std::string("invalid ") + op + ": " + e.what());
    }
    if (node->outputs.size() != defs.size()) {
      pos_ = op_pos;
      fail(op + " has " + std::to_string(node->outputs.size()) + " outputs, the line names " +
           std::to_string(defs.size()));
    }
    for (size_t k = 0; k < defs.size(); ++k) {
      if (!(node->outputs[k]->meta == defs[k].second)) {
        pos_ = op_pos;
        fail("declared type " + meta_str(defs[k].second) + " of %" + defs[k].first + " does not match " +
             op + "'s shape rule, which gives " + meta_str(node->outputs[k]->meta));
      }
      define(defs[k].first, node->outputs[k]);
    }
  }

  ops::AttrValue parse_attr_value() {
    skip_space();
    if (accept('[')) {
      std::vector<int64_t> list;
      if (!peek(']')) {
        do list.push_back(parse_int()); while (accept(','));
      }
      expect(']');
      return list;
    }
    if (accept('"')) {
      size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"') ++pos_;
      if (pos_ >= text_.size()) fail("unterminated string");
      return text_.substr(start, pos_++ - start);
    }
    bool is_float;
    double v = parse_number(&is_float);
    if (is_float) return v;
    return int64_t(v);
  }

  Tensor parse_literal(const ops::TensorMeta& m) {
    std::vector<double> data;
    bool is_float;
    if (accept('[')) {
      if (!peek(']')) {
        do data.push_back(parse_number(&is_float)); while (accept(','));
      }
      expect(']');
    } else {
      data.push_back(parse_number(&is_float));
    }
    if (int64_t(data.size()) != shape_numel(m.shape)) {
      fail("constant has " + std::to_string(data.size()) + " elements, its type " + meta_str(m) +
           " needs " + std::to_string(shape_numel(m.shape)));
    }
    return from_vector(data, m.shape, m.dtype);
  }

  // Numeric names keep their number as id; named values get ids above all of them.
  void assign_ids() {
    int next = 0;
    for (auto& [name, v] : order_) {
      if (std::isdigit(static_cast<unsigned char>(name[0])) && name.find_first_not_of("0123456789") == std::string::npos) {
        next = std::max(next, std::atoi(name.c_str()) + 1);
      }
    }
    for (auto& [name, v] : order_) {
      bool numeric = name.find_first_not_of("0123456789") == std::string::npos;
      if (numeric) {
        graph_->set_id(v, std::atoi(name.c_str()));
        v->name.clear();
      } else {
        graph_->set_id(v, next++);
        v->name = name;
      }
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<std::string, Value*> values_;
  std::vector<std::pair<std::string, Value*>> order_;
};

}  // namespace

std::unique_ptr<Graph> parse(const std::string& text) { return Parser(text).parse_graph(); }

}  // namespace smelt::ir
