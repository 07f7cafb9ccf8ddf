// Tensors stored in the golden JSON files (tests/golden/make_golden.py): {"shape", "dtype",
// "data"}. Header-only so that the support library does not depend on nlohmann_json.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::testing {

// The tensor `j` describes; undefined for null. Booleans in "data" read as 0/1.
inline Tensor tensor_from_json(const nlohmann::json& j) {
  if (j.is_null()) return Tensor();
  std::vector<double> values;
  values.reserve(j.at("data").size());
  for (const nlohmann::json& v : j.at("data")) {
    values.push_back(v.is_boolean() ? double(v.get<bool>()) : v.get<double>());
  }
  return from_vector(values, j.at("shape").get<Shape>(),
                     dtype_from_name(j.at("dtype").get<std::string>()));
}

}  // namespace smelt::testing
