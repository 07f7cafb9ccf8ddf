// A fixture with a fresh directory per test under /tmp, removed with everything in it afterwards.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace smelt::testing {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // `name` inside the directory.
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // The names of the directory's entries, sorted.
  std::vector<std::string> files() const;

  std::string dir_;
};

}  // namespace smelt::testing
