// Test helpers for the error paths: a call must throw smelt::Error, and its message must name
// what went wrong.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::testing {

// Runs `f`, expecting a smelt::Error whose message contains every one of `parts`. Fails on no
// error, on another exception type, and on a message that lacks a part.
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       const std::vector<std::string>& parts);

// EXPECT_TRUE(throws_with(f, needles)), for tests that check error paths one after another.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> needles);
void expect_error(const std::function<void()>& f, const std::string& needle);

}  // namespace smelt::testing
