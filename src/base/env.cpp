#include "base/env.h"

#include <cstdlib>

#include "base/excerpt.h"
#include "base/parse.h"
#include "smelt/error.h"

namespace smelt {

std::optional<std::string> env_text(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const std::optional<std::string> text = env_text(name);
  if (!text) return fallback;
  const std::optional<int64_t> value = parse_number<int64_t>(*text);
  SMELT_CHECK(value && *value >= min && *value <= max)
      << "environment variable " << name << "='" << excerpt(*text) << "' is "
      << (value || looks_like_integer(*text) ? "out of range" : "not an integer")
      << "; valid: an integer in [" << min << ", " << max << "], or unset for the default "
      << fallback;
  return *value;
}

std::string env_choice(const char* name, std::string_view fallback,
                       std::initializer_list<std::string_view> choices) {
  const std::optional<std::string> text = env_text(name);
  if (!text) return std::string(fallback);
  std::string valid;
  for (std::string_view c : choices) {
    if (*text == c) return *text;
    valid += (valid.empty() ? "" : ", ") + std::string(c);
  }
  SMELT_CHECK(false) << "environment variable " << name << "='" << excerpt(*text)
                     << "' is not a valid choice; valid: " << valid << ", or unset for the default "
                     << fallback;
  return {};
}

}  // namespace smelt
