#include "support/errors.h"

namespace smelt::testing {

::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      if (msg.find(p) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks '" << p << "': " << msg;
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-smelt exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error was thrown";
}

void expect_error(const std::function<void()>& f, std::initializer_list<std::string> needles) {
  EXPECT_TRUE(throws_with(f, std::vector<std::string>(needles)));
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  EXPECT_TRUE(throws_with(f, {needle}));
}

}  // namespace smelt::testing
