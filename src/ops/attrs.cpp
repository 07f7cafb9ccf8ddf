#include "ops/attrs.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace smelt {


Attrs& Attrs::set(const std::string& name, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == name) { v = std::move(value); return *this; }
  }
  items_.emplace_back(name, std::move(value));
  return *this;
}

const AttrValue* Attrs::find(const std::string& name) const {
  for (const auto& [k, v] : items_) if (k == name) return &v;
  return nullptr;
}

const AttrValue& Attrs::require(const std::string& name) const {
  const AttrValue* v = find(name);
  if (!v) {
    std::string present;
    for (const auto& [k, value] : items_) present += (present.empty() ? "" : ", ") + k;
    SMELT_CHECK(false) << "attribute '" << name << "' is missing (given: "
                       << (present.empty() ? "none" : present) << ")";
  }
  return *v;
}

namespace {

[[noreturn]] void wrong_type(const std::string& name, const AttrValue& v, const char* wanted) {
  SMELT_CHECK(false) << "attribute '" << name << "' must be " << wanted << ", got the " << ops::attr_type_name(v)
                     << " " << ops::attr_value_str(v);
  std::abort();
}

}  // namespace

int64_t Attrs::get_int(const std::string& name) const {
  const AttrValue& v = require(name);
  if (!std::holds_alternative<int64_t>(v)) wrong_type(name, v, "an int");
  return std::get<int64_t>(v);
}

int64_t Attrs::get_int(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}

double Attrs::get_float(const std::string& name) const {
  const AttrValue& v = require(name);
  if (std::holds_alternative<int64_t>(v)) return double(std::get<int64_t>(v));
  if (!std::holds_alternative<double>(v)) wrong_type(name, v, "a float");
  return std::get<double>(v);
}

double Attrs::get_float(const std::string& name, double fallback) const {
  return has(name) ? get_float(name) : fallback;
}

const std::vector<int64_t>& Attrs::get_ints(const std::string& name) const {
  const AttrValue& v = require(name);
  if (!std::holds_alternative<std::vector<int64_t>>(v)) wrong_type(name, v, "an int list");
  return std::get<std::vector<int64_t>>(v);
}

const std::string& Attrs::get_string(const std::string& name) const {
  const AttrValue& v = require(name);
  if (!std::holds_alternative<std::string>(v)) wrong_type(name, v, "a string");
  return std::get<std::string>(v);
}

DType Attrs::get_dtype(const std::string& name) const {
  const AttrValue& v = require(name);
  if (!std::holds_alternative<DType>(v)) wrong_type(name, v, "a dtype (f32, f64, i64, i32, bool, u8)");
  return std::get<DType>(v);
}

}  // namespace smelt

namespace smelt::ops {

bool dtype_from_short_name(const std::string& name, DType* out) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType t = DType(i);
    if (name == dtype_short_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

std::string float_str(double v) {
  if (std::isnan(v)) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof v);
    if (bits == 0x7ff8000000000000ull) return "nan";
    char hex[40];
    std::snprintf(hex, sizeof hex, "nan:0x%016llx", static_cast<unsigned long long>(bits));
    return hex;
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

const char* attr_type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "int";
    case 1: return "float";
    case 2: return "int list";
    case 3: return "string";
    default: return "dtype";
  }
}

std::string attr_value_str(const AttrValue& v) {
  std::ostringstream os;
  if (auto* i = std::get_if<int64_t>(&v)) {
    os << *i;
  } else if (auto* d = std::get_if<double>(&v)) {
    std::string s = float_str(*d);
    if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // keep it a float
    os << s;
  } else if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
    os << "[";
    for (size_t k = 0; k < l->size(); ++k) os << (k ? "," : "") << (*l)[k];
    os << "]";
  } else if (auto* t = std::get_if<DType>(&v)) {
    os << dtype_short_name(*t);
  } else {
    os << '"';
    for (char c : std::get<std::string>(v)) {
      if (c == '"' || c == '\\') os << '\\';
      os << c;
    }
    os << '"';
  }
  return os.str();
}

const std::vector<int64_t>& get_ints_of_size(const Attrs& attrs, const char* op, const std::string& name,
                                             size_t size) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  SMELT_CHECK(v.size() == size) << op << ": attribute '" << name << "' needs " << size << " values, got "
                                << attr_value_str(v);
  return v;
}

const std::vector<int64_t>& get_shape_attr(const Attrs& attrs, const char* op, const std::string& name) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  int64_t numel = 1;
  for (int64_t d : v) {
    SMELT_CHECK(d >= 0) << op << ": attribute '" << name << "' " << attr_value_str(v) << " has a negative dim";
    SMELT_CHECK(d == 0 || !__builtin_mul_overflow(numel, d, &numel))
        << op << ": attribute '" << name << "' " << attr_value_str(v) << " has more elements than int64 counts (size overflow)";
  }
  return v;
}

int64_t get_int_in(const Attrs& attrs, const char* op, const std::string& name, int64_t lo, int64_t hi) {
  int64_t v = attrs.get_int(name);
  SMELT_CHECK(v >= lo && v <= hi) << op << ": attribute '" << name << "' is " << v << ", valid: [" << lo << ", "
                                  << hi << "]";
  return v;
}

}  // namespace smelt::ops
