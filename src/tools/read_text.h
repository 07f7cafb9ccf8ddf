// A whole text file read for a subcommand ("-": standard input); an error naming the subcommand
// and the file when it cannot be opened.
#pragma once

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "smelt/error.h"

namespace smelt::tools {

inline std::string read_text(const std::string& file, const char* command) {
  std::stringstream ss;
  if (file == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(file);
  SMELT_CHECK(f.good()) << command << ": cannot open '" << file << "'";
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace smelt::tools
