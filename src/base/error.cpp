#include "smelt/error.h"

#include <cstring>

namespace smelt::detail {

ErrorBuilder::ErrorBuilder(const char* file, int line, const char* cond, bool internal)
    : file_(file), line_(line), cond_(cond), internal_(internal) {}

ErrorBuilder::~ErrorBuilder() noexcept(false) {
  std::string text = message_.str();
  if (internal_) {
    const char* base = std::strrchr(file_, '/');
    std::ostringstream full;
    full << "internal error (a smelt bug) at " << (base ? base + 1 : file_) << ":" << line_
         << ": check `" << cond_ << "` failed" << (text.empty() ? "" : ": ") << text;
    text = full.str();
  } else if (text.empty()) {
    text = std::string("check `") + cond_ + "` failed";
  }
  throw Error(text, internal_);
}

}  // namespace smelt::detail
