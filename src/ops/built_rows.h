// Which rows of ops.def this build implements, at compile time (PENDING rows are comments and do
// not count). Code that must compile on a branch where an op is not merged yet names the op only
// in the discarded branch of `if constexpr (ops::rows_built("..."))`.
#pragma once

#include <string_view>

namespace smelt::ops {

// The names of the implemented rows, in ops.def order.
inline constexpr std::string_view kBuiltRows[] = {
#define SMELT_OP(name, kind, arity, flags) #name,
#include "ops/ops.def"
#undef SMELT_OP
};

constexpr bool row_built(std::string_view row) {
  for (std::string_view built : kBuiltRows) {
    if (built == row) return true;
  }
  return false;
}

// True when every space-separated row in `rows` is implemented.
constexpr bool rows_built(std::string_view rows) {
  while (!rows.empty()) {
    size_t end = rows.find(' ');
    if (!row_built(rows.substr(0, end))) return false;
    if (end == std::string_view::npos) break;
    rows.remove_prefix(end + 1);
  }
  return true;
}

}  // namespace smelt::ops
