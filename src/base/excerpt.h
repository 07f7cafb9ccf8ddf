// Echoing user data in error messages: a bounded, single-line excerpt. A message must stay
// readable (and cheap) whatever the input holds: a 100 MB JSON string, control bytes, a
// 309-digit number.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace smelt {

inline constexpr size_t kExcerptChars = 80;

// The first `max_chars` bytes of `text`, non-printable bytes written as \xNN, "..." appended
// when something was cut. Bytes >= 0x80 are kept as they are, so UTF-8 names stay readable.
inline std::string excerpt(std::string_view text, size_t max_chars = kExcerptChars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t n = text.size() < max_chars ? text.size() : max_chars;
  // Cut before a UTF-8 continuation byte, never inside a character.
  if (n < text.size()) {
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;
  }
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (n < text.size()) out += "...";
  return out;
}

}  // namespace smelt
