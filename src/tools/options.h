// Numeric command-line options, checked strictly before CLI11 converts them: the whole text must
// be a number of the option's type within its range. The error is one line that names the
// option, echoes what was typed (cut to a readable length) and gives the valid range — never a
// silent wrap-around, and never a 309-digit rendering of a double bound.
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/excerpt.h"
#include "base/parse.h"

namespace smelt::tools {

// An integer of type T in [min, max].
template <class T>
CLI::Validator integer_in(T min, T max) {
  static_assert(std::is_integral_v<T>);
  std::ostringstream range;
  range << "an integer in [" << min << ", " << max << "]";
  return CLI::Validator(
      [min, max, valid = range.str()](std::string& text) -> std::string {
        const std::optional<T> v = parse_number<T>(text);
        if (v && *v >= min && *v <= max) return {};
        return "'" + excerpt(text) + "' is " +
               (v || looks_like_integer(text) ? "out of range" : "not an integer") + "; valid: " +
               valid;
      },
      range.str());
}

// Any value of an unsigned integer type (a seed): a sign, a fraction or more than 64 bits are
// refused instead of wrapping around.
inline CLI::Validator any_uint64() {
  return integer_in<uint64_t>(0, std::numeric_limits<uint64_t>::max());
}

// A finite number in (0, max].
inline CLI::Validator positive_at_most(double max) {
  std::ostringstream range;
  range << "a number in (0, " << max << "]";
  return CLI::Validator(
      [max, valid = range.str()](std::string& text) -> std::string {
        const std::optional<double> v = parse_number<double>(text);
        if (v && *v > 0 && *v <= max) return {};
        return "'" + excerpt(text) + "' is " + (v ? "out of range" : "not a finite number") +
               "; valid: " + valid;
      },
      range.str());
}

}  // namespace smelt::tools
