// Strict reading of SMELT_* environment variables and of typed numbers: a bad value is an error
// naming the variable, its value (cut) and the valid range; never a silent default.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "base/env.h"
#include "base/parse.h"
#include "passes/fold.h"
#include "passes/pass_manager.h"
#include "support/errors.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::ScopedEnv;

using testing::expect_error;

// Sets a variable for one test and restores the previous state.
constexpr const char* kVar = "SMELT_TEST_ENV_VALUE";

TEST(Parse, NumbersMustBeTheWholeText) {
  EXPECT_EQ(parse_number<int64_t>("42"), 42);
  EXPECT_EQ(parse_number<int64_t>("-7"), -7);
  EXPECT_EQ(parse_number<int64_t>("9223372036854775807"), std::numeric_limits<int64_t>::max());
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10", "1e3", "1.0", "abc", "--1",
                          "9223372036854775808", "99999999999999999999"}) {
    EXPECT_FALSE(parse_number<int64_t>(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(parse_number<uint64_t>("-1").has_value());
  EXPECT_EQ(parse_number<uint64_t>("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parse_number<double>("1e-3"), 1e-3);
  for (const char* bad : {"inf", "nan", "1e400", "0.1.", "1,5", ""}) {
    EXPECT_FALSE(parse_number<double>(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_TRUE(looks_like_integer("-99999999999999999999"));
  EXPECT_FALSE(looks_like_integer("12x"));
  EXPECT_FALSE(looks_like_integer("-"));
}

TEST(Env, UnsetOrEmptyMeansTheDefault) {
  {
    ScopedEnv env(kVar, nullptr);
    EXPECT_EQ(env_int(kVar, 17, 0, 100), 17);
    EXPECT_EQ(env_choice(kVar, "b", {"a", "b"}), "b");
    EXPECT_FALSE(env_text(kVar).has_value());
  }
  ScopedEnv env(kVar, "");
  EXPECT_EQ(env_int(kVar, 17, 0, 100), 17);
}

TEST(Env, ValidValuesAreRead) {
  ScopedEnv env(kVar, "100");
  EXPECT_EQ(env_int(kVar, 17, 0, 100), 100);
  ScopedEnv env2("SMELT_TEST_ENV_CHOICE", "own");
  EXPECT_EQ(env_choice("SMELT_TEST_ENV_CHOICE", "auto", {"auto", "own"}), "own");
}

TEST(Env, BadIntegersAreErrorsWithNameValueAndRange) {
  struct Case {
    const char* value;
    const char* why;
  };
  for (const Case& c : {Case{"abc", "not an integer"}, Case{"-5", "out of range"},
                        Case{"12x", "not an integer"}, Case{" 12", "not an integer"},
                        Case{"1e3", "not an integer"}, Case{"101", "out of range"},
                        Case{"99999999999999999999", "out of range"}}) {
    ScopedEnv env(kVar, c.value);
    expect_error([&] { env_int(kVar, 17, 0, 100); },
                 {kVar, std::string("'") + c.value + "'", c.why, "[0, 100]", "default 17"});
  }
}

TEST(Env, LongValuesAreCutInMessages) {
  const std::string huge(5000, '7');
  ScopedEnv env(kVar, huge.c_str());
  try {
    env_int(kVar, 1, 0, 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
    EXPECT_NE(std::string(e.what()).find("..."), std::string::npos) << e.what();
  }
}

TEST(Env, BadChoicesListTheValidOnes) {
  ScopedEnv env(kVar, "fast");
  expect_error([&] { env_choice(kVar, "auto", {"auto", "own", "openblas"}); },
               {kVar, "'fast'", "auto, own, openblas"});
}

// The variables smelt reads, through the functions that read them.
TEST(Env, PassVariablesAreStrict) {
  {
    ScopedEnv env("SMELT_FOLD_MAX_ELEMENTS", "-1");
    expect_error([] { passes::fold_options_from_env(); },
                 {"SMELT_FOLD_MAX_ELEMENTS", "'-1'", "out of range"});
  }
  {
    ScopedEnv env("SMELT_FOLD_MAX_ELEMENTS", "12");
    EXPECT_EQ(passes::fold_options_from_env().max_elements, 12);
  }
  {
    ScopedEnv env("SMELT_PRINT_IR_AFTER", "no_such_pass");
    expect_error([] { passes::options_from_env(); },
                 {"SMELT_PRINT_IR_AFTER", "'no_such_pass'", "all, or a pass name"});
  }
  {
    ScopedEnv env("SMELT_DISABLE_PASSES", "cse,no_such_pass");
    expect_error([] { passes::options_from_env(); },
                 {"SMELT_DISABLE_PASSES", "'cse,no_such_pass'", "'no_such_pass'"});
  }
  ScopedEnv env("SMELT_DISABLE_PASSES", "cse,,dce");
  EXPECT_EQ(passes::options_from_env().disabled.size(), 2u);
}

}  // namespace
}  // namespace smelt
