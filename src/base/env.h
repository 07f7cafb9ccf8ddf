// SMELT_* environment variables, read strictly: a variable that is set to something other than
// a valid value is a smelt::Error naming the variable, its value and what would be valid, never
// a silent default. Unset and empty (VAR=) both mean "not set". Every variable is listed in
// docs/env.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace smelt {

// The text of `name`, or nullopt when unset or empty.
std::optional<std::string> env_text(const char* name);

// An integer in [min, max] (decimal, nothing else); `fallback` when not set.
int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max);

// One of `choices`, exactly; `fallback` when not set.
std::string env_choice(const char* name, std::string_view fallback,
                       std::initializer_list<std::string_view> choices);

}  // namespace smelt
