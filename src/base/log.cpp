#include "base/log.h"

#include <cstdio>

#include "base/env.h"

namespace smelt {

int debug_level() {
  static const int level = int(env_int("SMELT_DEBUG", 0, 0, 4));
  return level;
}

void debug_log(int level, const std::string& line) {
  if (debug_level() >= level) std::fputs(("smelt: " + line + "\n").c_str(), stderr);
}

void warn(const std::string& line) { std::fputs(("smelt: warning: " + line + "\n").c_str(), stderr); }

}  // namespace smelt
