// Strict parsing of numbers the user typed (environment variables, command-line options): the
// whole text must be the number, in plain decimal (floating point also in exponent form), with
// no spaces, no '+', no trailing characters; a value that does not fit the type is no number.
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace smelt {

template <class T>
std::optional<T> parse_number(std::string_view text) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  T value{};
  const char* end = text.data() + text.size();
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::from_chars(text.data(), end, value, std::chars_format::general);
  } else {
    r = std::from_chars(text.data(), end, value, 10);
  }
  if (text.empty() || r.ec != std::errc() || r.ptr != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return std::nullopt;  // "inf", "nan": never a useful setting
  }
  return value;
}

// An optional '-' and decimal digits: written as an integer, maybe too large for any type (tells
// "out of range" from "not an integer" in messages).
inline bool looks_like_integer(std::string_view text) {
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace smelt
