// Op attributes: a small ordered list of named values (ints, floats, int lists, strings).
// Ordered so printing is deterministic; lookups are linear (an op has a handful).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "smelt/error.h"

namespace smelt::ops {

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(const std::string& name, AttrValue value);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_float(const std::string& name) const;  // ints convert
  double get_float(const std::string& name, double fallback) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  const AttrValue* find(const std::string& name) const;
  const AttrValue& require(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

std::string attr_value_str(const AttrValue& v);

}  // namespace smelt::ops
