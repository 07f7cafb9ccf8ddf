// smelt::Error and the two check macros.
//
//   SMELT_CHECK(cond) << "what went wrong, the values, what would be valid";
//       for the user's mistakes (bad shape, dtype, file). Throws smelt::Error.
//   SMELT_INTERNAL_CHECK(cond) << "...";
//       for smelt's own bugs. Also throws smelt::Error, marked as internal.
//
// The message is built only when the check fails.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace smelt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, bool internal = false)
      : std::runtime_error(what), internal_(internal) {}
  // True for a failed SMELT_INTERNAL_CHECK (a smelt bug). Tell bugs from user errors by this,
  // never by the message: a user error may quote input that reads "internal error".
  bool internal() const { return internal_; }

 private:
  bool internal_;
};

namespace detail {

// Collects the message with operator<< and throws from its destructor, which runs at the end of
// the full expression `SMELT_CHECK(c) << a << b;`.
class ErrorBuilder {
 public:
  ErrorBuilder(const char* file, int line, const char* cond, bool internal);
  ErrorBuilder(const ErrorBuilder&) = delete;
  ErrorBuilder& operator=(const ErrorBuilder&) = delete;
  [[noreturn]] ~ErrorBuilder() noexcept(false);

  template <class T>
  ErrorBuilder& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  std::ostringstream message_;
  const char* file_;
  int line_;
  const char* cond_;
  bool internal_;
};

}  // namespace detail
}  // namespace smelt

#define SMELT_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::smelt::detail::ErrorBuilder(__FILE__, __LINE__, #cond, false)

#define SMELT_INTERNAL_CHECK(cond) \
  if (cond) {                      \
  } else                           \
    ::smelt::detail::ErrorBuilder(__FILE__, __LINE__, #cond, true)
