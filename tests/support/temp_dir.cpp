#include "support/temp_dir.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "runtime/tuning_file.h"

namespace smelt::testing {

void TempDirTest::SetUp() {
  char pattern[] = "/tmp/smelt_test.XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  dir_ = pattern;
}

void TempDirTest::TearDown() {
  if (dir_.empty()) return;
  for (const std::string& f : files()) std::remove(path(f).c_str());
  rmdir(dir_.c_str());
}

void CacheDirTest::SetUp() {
  TempDirTest::SetUp();
  setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  runtime::tuning_file_reload();
}

void CacheDirTest::TearDown() {
  unsetenv("SMELT_CACHE_DIR");
  runtime::tuning_file_reload();
  TempDirTest::TearDown();
}

std::vector<std::string> TempDirTest::files() const {
  std::vector<std::string> out;
  DIR* d = opendir(dir_.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  if (d) closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace smelt::testing
