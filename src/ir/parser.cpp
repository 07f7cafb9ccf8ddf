// Recursive-descent parser for the text IR (grammar in printer.h's example):
//   graph   := 'graph' '(' [param {',' param}] ')' '{' {stmt} 'return' [ref {',' ref}] '}'
//   param   := ref ':' meta ['param']
//   stmt    := ref ':' meta {',' ref ':' meta} '=' ( 'constant' literal
//                                                  | op '(' refs ')' [attrs] [graph] )
//   meta    := dtype '[' [int {',' int}] ']'
//   attrs   := '{' name '=' value {',' name '=' value} '}'
//   value   := int | float | '[' [int {',' int}] ']' | '"' chars '"' | dtype
//   literal := number | '[' [number {',' number}] ']'
// A `group` node is followed by its body, a nested graph with value names of its own.
//
// Value names are word characters and '.': `%<digits>` keeps the number as the value's id (no leading zeros, so `%0` and
// `%00` cannot both name id 0: `%00` is rejected; below kMaxValueId); any other `%name` is kept
// as the value's name. Numbers are read exactly, per dtype (printer.cpp lists the spellings);
// a number that does not fit its dtype (a fraction or NaN in an i64, 1e999 in f32, 2 in a bool)
// is an error with its line and column.
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "ir/printer.h"

namespace smelt::ir {
namespace {

constexpr int kMaxNesting = 32;  // group bodies inside group bodies

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  std::unique_ptr<Graph> parse_top() {
    auto g = parse_graph();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    return g;
  }

 private:
  struct Scope {
    std::unique_ptr<Graph> graph;
    std::unordered_map<std::string, Value*> values;
    std::vector<std::pair<std::string, Value*>> order;
  };

  std::unique_ptr<Graph> parse_graph() {
    if (depth_ >= kMaxNesting) fail("group bodies nest deeper than " + std::to_string(kMaxNesting) + " levels");
    ++depth_;
    Scope outer = std::move(scope_);
    scope_ = Scope{};
    scope_.graph = std::make_unique<Graph>();
    expect_word("graph");
    expect('(');
    if (!peek(')')) {
      do parse_param(); while (accept(','));
    }
    expect(')');
    expect('{');
    while (!peek_word("return")) {
      if (at_end()) fail("expected 'return' before the end of the text");
      parse_stmt();
    }
    expect_word("return");
    skip_space();
    if (peek('%')) {
      do scope_.graph->add_output(lookup(parse_ref())); while (accept(','));
    }
    expect('}');
    assign_ids();
    std::unique_ptr<Graph> g = std::move(scope_.graph);
    scope_ = std::move(outer);
    --depth_;
    return g;
  }

  [[noreturn]] void fail(const std::string& what) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    SMELT_CHECK(false) << "IR parse error at line " << line << ", column " << col << ": " << what;
    std::abort();
  }

  bool at_end() { skip_space(); return pos_ >= text_.size(); }
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
  static bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
  std::string word() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
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

  // A number's text: an optional sign, then letters, digits, '.', ':' and exponent signs.
  std::string number_token() {
    skip_space();
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      bool exponent_sign = (c == '+' || c == '-') && pos_ > start && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
      if (!is_word_char(c) && c != '.' && c != ':' && !exponent_sign) break;
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return text_.substr(start, pos_ - start);
  }
  // Fails at the start of the token just read.
  [[noreturn]] void fail_token(const std::string& tok, const std::string& what) {
    pos_ -= tok.size();
    fail(what);
  }
  static bool is_integer_text(const std::string& tok) {
    size_t start = tok[0] == '-' ? 1 : 0;
    return tok.size() > start && tok.find_first_not_of("0123456789", start) == std::string::npos;
  }
  int64_t parse_int() {
    std::string tok = number_token();
    if (!is_integer_text(tok)) fail_token(tok, "expected an integer, got '" + tok + "'");
    int64_t v = 0;
    auto res = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (res.ec != std::errc()) fail_token(tok, "integer " + tok + " is out of the int64 range");
    return v;
  }

  // A float of type F (float or double) from its text: inf, -inf, nan, nan:0x<bits>, or decimal.
  template <class F, class Bits>
  F float_from(const std::string& tok, const char* dtype) {
    if (tok == "inf") return std::numeric_limits<F>::infinity();
    if (tok == "-inf") return -std::numeric_limits<F>::infinity();
    if (tok == "nan") return std::numeric_limits<F>::quiet_NaN();
    if (tok.rfind("nan:0x", 0) == 0) {
      Bits bits = 0;
      const char* first = tok.data() + 6;
      auto res = std::from_chars(first, tok.data() + tok.size(), bits, 16);
      F v;
      std::memcpy(&v, &bits, sizeof v);
      if (res.ec != std::errc() || res.ptr != tok.data() + tok.size() || first == res.ptr || !std::isnan(v)) {
        fail_token(tok, "'" + tok + "' is not the bit pattern of a " + dtype + " NaN");
      }
      return v;
    }
    F v = 0;
    auto res = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (res.ptr != tok.data() + tok.size() || (res.ec != std::errc() && res.ec != std::errc::result_out_of_range)) {
      fail_token(tok, "expected a " + std::string(dtype) + " number, got '" + tok + "'");
    }
    if (res.ec == std::errc::result_out_of_range) {
      fail_token(tok, tok + " is out of the " + dtype + " range (write inf, -inf or 0 to mean them)");
    }
    return v;
  }

  // One element of a constant of dtype `t`, appended to `bytes`.
  void parse_element(DType t, std::string* bytes) {
    std::string tok = number_token();
    auto put = [&](const auto& v) { bytes->append(reinterpret_cast<const char*>(&v), sizeof v); };
    switch (t) {
      case DType::Float32: put(float_from<float, uint32_t>(tok, "f32")); return;
      case DType::Float64: put(float_from<double, uint64_t>(tok, "f64")); return;
      case DType::Int64: case DType::Int32: case DType::UInt8: case DType::Int8: case DType::Bool: {
        if (!is_integer_text(tok)) fail_token(tok, std::string("an ") + ops::dtype_short_name(t) + " constant needs integers, got '" + tok + "'");
        int64_t v = 0;
        auto res = std::from_chars(tok.data(), tok.data() + tok.size(), v);
        int64_t lo = t == DType::Int64   ? std::numeric_limits<int64_t>::min()
                     : t == DType::Int32 ? std::numeric_limits<int32_t>::min()
                     : t == DType::Int8  ? -128
                                         : 0;
        int64_t hi = t == DType::Int64   ? std::numeric_limits<int64_t>::max()
                     : t == DType::Int32 ? std::numeric_limits<int32_t>::max()
                     : t == DType::UInt8 ? 255
                     : t == DType::Int8  ? 127
                                         : 1;
        if (res.ec != std::errc() || v < lo || v > hi) {
          fail_token(tok, tok + " is out of the " + ops::dtype_short_name(t) + " range [" + std::to_string(lo) +
                              ", " + std::to_string(hi) + "]");
        }
        if (t == DType::Int64) put(v);
        else if (t == DType::Int32) put(int32_t(v));
        else if (t == DType::UInt8) put(uint8_t(v));
        else if (t == DType::Int8) put(int8_t(v));
        else put(bool(v));
        return;
      }
    }
    fail_token(tok, "constants of this dtype cannot be written");
  }

  std::string parse_ref() {
    expect('%');
    size_t start = pos_;
    while (pos_ < text_.size() && (is_word_char(text_[pos_]) || text_[pos_] == '.')) ++pos_;
    std::string name = text_.substr(start, pos_ - start);
    if (name.empty()) fail("expected a value name after '%'");
    if (is_number_name(name)) {
      if (name.size() > 1 && name[0] == '0') {
        pos_ -= name.size();
        fail("value number %" + name + " has a leading zero: value numbers are written without them");
      }
      if (name.size() > 10 || std::stoll(name) >= kMaxValueId) {
        pos_ -= name.size();
        fail("value number %" + name + " is too large (value numbers are below " + std::to_string(kMaxValueId) + ")");
      }
    }
    return name;
  }
  static bool is_number_name(const std::string& name) {
    return name.find_first_not_of("0123456789") == std::string::npos;
  }

  ops::TensorMeta parse_meta() {
    size_t start = (skip_space(), pos_);
    std::string dt = word();
    ops::TensorMeta m;
    if (!ops::dtype_from_short_name(dt, &m.dtype)) {
      pos_ = start;
      fail("unknown dtype '" + dt + "'; valid: f32, f64, i64, i32, bool, u8");
    }
    expect('[');
    int64_t numel = 1;
    if (!peek(']')) {
      do {
        int64_t d = parse_int();
        if (d < 0) fail("negative dim in a shape");
        // Every product of dims (zero dims ignored) must fit in int64: strides and element counts
        // are computed from them.
        if (d > 0 && __builtin_mul_overflow(numel, d, &numel)) {
          fail("the shape's element count overflows int64");
        }
        m.shape.push_back(d);
      } while (accept(','));
    }
    expect(']');
    return m;
  }
  Value* lookup(const std::string& name) {
    auto it = scope_.values.find(name);
    if (it == scope_.values.end()) fail("use of undefined value %" + name);
    return it->second;
  }
  void define(const std::string& name, Value* v) {
    if (!scope_.values.emplace(name, v).second) fail("value %" + name + " is defined twice");
    scope_.order.emplace_back(name, v);
  }

  void parse_param() {
    std::string name = parse_ref();
    expect(':');
    ops::TensorMeta m = parse_meta();
    ValueKind kind = ValueKind::Input;
    if (peek_word("param")) { word(); kind = ValueKind::Param; }
    define(name, scope_.graph->add_input(m, "", kind));
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
      define(defs[0].first, scope_.graph->add_constant(parse_literal(defs[0].second)));
      return;
    }
    ops::OpId id;
    if (!ops::op_from_name(op, &id)) {
      pos_ = op_pos;
      fail("unknown op '" + op + "' (neither built in nor registered: a user-defined op is parsed once "
           "smelt::register_op has added it)");
    }
    expect('(');
    std::vector<Value*> inputs;
    if (!peek(')')) {
      do inputs.push_back(lookup(parse_ref())); while (accept(','));
    }
    expect(')');
    ops::Attrs attrs;
    if (accept('{')) {
      do {
        size_t key_pos = (skip_space(), pos_);
        std::string key = word();
        if (key.empty()) fail("expected an attribute name");
        if (attrs.has(key)) { pos_ = key_pos; fail("attribute '" + key + "' is given twice"); }
        expect('=');
        attrs.set(key, parse_attr_value());
      } while (accept(','));
      expect('}');
    }
    std::unique_ptr<Graph> body;
    if (id == ops::OpId::group) body = parse_graph();
    Node* node;
    try {
      node = body ? scope_.graph->add_group(inputs, std::move(body), nullptr, attrs)
                  : scope_.graph->add_node(id, inputs, attrs);
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
             op + "'s " + (id == ops::OpId::group ? "body" : "shape rule") + ", which gives " +
             meta_str(node->outputs[k]->meta));
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
      std::string s;
      while (pos_ < text_.size() && text_[pos_] != '"') {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        s += text_[pos_++];
      }
      if (pos_ >= text_.size()) fail("unterminated string");
      ++pos_;
      return s;
    }
    DType dtype;
    for (int i = 0; i < kDTypeCount; ++i) {
      if (!peek_word(dtype_short_name(DType(i)))) continue;
      ops::dtype_from_short_name(word(), &dtype);
      return dtype;
    }
    std::string tok = number_token();
    if (is_integer_text(tok)) {
      int64_t v = 0;
      auto res = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (res.ec != std::errc()) fail_token(tok, "integer " + tok + " is out of the int64 range");
      return v;
    }
    return float_from<double, uint64_t>(tok, "float");
  }

  Tensor parse_literal(const ops::TensorMeta& m) {
    std::string bytes;
    int64_t count = 0;
    const int64_t numel = shape_numel(m.shape);
    if (accept('[')) {
      if (!peek(']')) {
        do {
          if (++count > numel) fail("constant has more elements than its type " + meta_str(m) + " holds");
          parse_element(m.dtype, &bytes);
        } while (accept(','));
      }
      expect(']');
    } else {
      parse_element(m.dtype, &bytes);
      count = 1;
    }
    if (count != numel) {
      fail("constant has " + std::to_string(count) + " elements, its type " + meta_str(m) + " needs " +
           std::to_string(numel));
    }
    Tensor t = empty(m.shape, m.dtype);
    if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    return t;
  }

  // Numeric names keep their number as id; named values get ids above all of them, or, when
  // that would pass kMaxValueId, the lowest ids no number uses.
  void assign_ids() {
    int next = 0;
    size_t named = 0;
    std::unordered_map<int, bool> used;
    for (auto& [name, v] : scope_.order) {
      if (is_number_name(name)) {
        next = std::max(next, std::stoi(name) + 1);
        used[std::stoi(name)] = true;
      } else {
        ++named;
      }
    }
    const bool fill_gaps = int64_t(next) + int64_t(named) > kMaxValueId;
    if (fill_gaps) next = 0;
    for (auto& [name, v] : scope_.order) {
      if (is_number_name(name)) {
        scope_.graph->set_id(v, std::stoi(name));
        v->name.clear();
      } else {
        while (fill_gaps && used.count(next)) ++next;
        scope_.graph->set_id(v, next++);
        v->name = name;
      }
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
  Scope scope_;
};

}  // namespace

std::unique_ptr<Graph> parse(const std::string& text) { return Parser(text).parse_top(); }

}  // namespace smelt::ir
