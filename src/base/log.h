// Diagnostics on stderr, gated by SMELT_DEBUG (0-4, read once):
//   1: a line per compile (time, kernel count, cache hits) and each recompile's reason
//   2: + fusion groups    3: + paths of generated sources    4: + the IR after each stage
// Warnings print whatever the level.
#pragma once

#include <string>

namespace smelt {

int debug_level();
// Writes "smelt: <line>\n" to stderr when debug_level() >= level (one write: lines from threads
// do not interleave).
void debug_log(int level, const std::string& line);
void warn(const std::string& line);

}  // namespace smelt
