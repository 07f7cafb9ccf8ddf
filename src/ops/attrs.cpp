#include "ops/attrs.h"

#include <sstream>

namespace smelt::ops {

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
  SMELT_INTERNAL_CHECK(v) << "attribute '" << name << "' is missing";
  return *v;
}

int64_t Attrs::get_int(const std::string& name) const {
  const AttrValue& v = require(name);
  SMELT_INTERNAL_CHECK(std::holds_alternative<int64_t>(v)) << "attribute '" << name << "' is not an int";
  return std::get<int64_t>(v);
}

int64_t Attrs::get_int(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}

double Attrs::get_float(const std::string& name) const {
  const AttrValue& v = require(name);
  if (std::holds_alternative<int64_t>(v)) return double(std::get<int64_t>(v));
  SMELT_INTERNAL_CHECK(std::holds_alternative<double>(v)) << "attribute '" << name << "' is not a float";
  return std::get<double>(v);
}

double Attrs::get_float(const std::string& name, double fallback) const {
  return has(name) ? get_float(name) : fallback;
}

const std::vector<int64_t>& Attrs::get_ints(const std::string& name) const {
  const AttrValue& v = require(name);
  SMELT_INTERNAL_CHECK(std::holds_alternative<std::vector<int64_t>>(v))
      << "attribute '" << name << "' is not an int list";
  return std::get<std::vector<int64_t>>(v);
}

const std::string& Attrs::get_string(const std::string& name) const {
  const AttrValue& v = require(name);
  SMELT_INTERNAL_CHECK(std::holds_alternative<std::string>(v)) << "attribute '" << name << "' is not a string";
  return std::get<std::string>(v);
}

std::string attr_value_str(const AttrValue& v) {
  std::ostringstream os;
  if (auto* i = std::get_if<int64_t>(&v)) {
    os << *i;
  } else if (auto* d = std::get_if<double>(&v)) {
    os.precision(17);
    os << *d;
    if (os.str().find_first_of(".eEn") == std::string::npos) os << ".0";  // keep it a float
  } else if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
    os << "[";
    for (size_t k = 0; k < l->size(); ++k) os << (k ? "," : "") << (*l)[k];
    os << "]";
  } else {
    os << '"' << std::get<std::string>(v) << '"';
  }
  return os.str();
}

}  // namespace smelt::ops
