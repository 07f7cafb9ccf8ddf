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

// The directory as $SMELT_CACHE_DIR, the tuning file (runtime/tuning_file.h) read again from it:
// each test starts with an empty kernel cache and tuning table, and leaves the variable unset.
class CacheDirTest : public TempDirTest {
 protected:
  void SetUp() override;
  void TearDown() override;
};

}  // namespace smelt::testing
