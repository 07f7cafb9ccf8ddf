// The op table behind golden_test.cpp: a golden case's "op" and "attrs" (written by
// tests/golden/make_golden.py) mapped to the smelt call they describe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::golden {

// The arguments of one golden case: named tensor inputs and JSON attributes.
class GoldenCall {
 public:
  GoldenCall(const nlohmann::json& attrs, std::vector<std::string> names,
             std::vector<Tensor> inputs);

  const Tensor& in(const std::string& name) const;  // a required input
  Tensor optional(const std::string& name) const;   // undefined when the case omits it
  const std::vector<Tensor>& all() const { return inputs_; }  // in case order (cat, stack)

  bool has(const char* key) const { return attrs_.contains(key); }
  int64_t i64(const char* key) const { return attr(key).get<int64_t>(); }
  double f64(const char* key) const { return attr(key).get<double>(); }
  bool flag(const char* key) const { return attr(key).get<bool>(); }
  std::string str(const char* key) const { return attr(key).get<std::string>(); }
  std::vector<int64_t> ints(const char* key) const { return attr(key).get<std::vector<int64_t>>(); }
  std::optional<double> maybe_f64(const char* key) const;
  Reduction reduction() const;  // "reduction": "mean" | "sum" | "none"

 private:
  const nlohmann::json& attr(const char* key) const;
  const nlohmann::json& attrs_;
  std::vector<std::string> names_;
  std::vector<Tensor> inputs_;
};

using GoldenFn = std::function<std::vector<Tensor>(const GoldenCall&)>;

// Case op name -> the smelt call. Every op make_golden.py writes has an entry.
const std::map<std::string, GoldenFn>& golden_op_table();

// The name of every op in the op table (src/ops/ops.def).
std::vector<std::string> op_table_names();

}  // namespace smelt::golden
