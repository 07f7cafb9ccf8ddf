// The headers generated kernels include, embedded in libsmelt (codegen/kernel_headers.h): the
// embedded text is the source tree's at build time, and write_kernel_headers puts exactly that
// text into a cache directory, repairing whatever else it finds there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "codegen/disk_cache.h"
#include "codegen/kernel_headers.h"
#include "smelt/error.h"
#include "support/temp_dir.h"

namespace smelt::codegen::testing {
namespace {

using smelt::testing::TempDirTest;

std::string read_text(const std::string& path) {
  std::string text;
  EXPECT_TRUE(disk::read_file(path, &text)) << path;
  return text;
}

const KernelHeader* find_header(const std::string& path) {
  for (const KernelHeader& h : kernel_headers()) {
    if (path == h.path) return &h;
  }
  return nullptr;
}

// The build embedded the scalar math this checkout holds (the test binary is built with it).
TEST(KernelHeaders, TheEmbeddedScalarHeaderIsTheSourceTrees) {
  const KernelHeader* scalar = find_header("kernels/scalar.h");
  ASSERT_NE(scalar, nullptr);
  EXPECT_EQ(std::string(scalar->text), read_text(std::string(SMELT_TEST_DIR) + "/../src/kernels/scalar.h"));
  EXPECT_EQ(kernel_headers_hash().size(), disk::kKeyChars);
}

class KernelHeadersDir : public TempDirTest {};

TEST_F(KernelHeadersDir, WrittenByteForByteAndRepaired) {
  const std::string include = write_kernel_headers(dir_);
  EXPECT_EQ(include, dir_ + "/include/" + kernel_headers_hash().substr(0, 16));
  for (const KernelHeader& h : kernel_headers()) EXPECT_EQ(read_text(include + "/" + h.path), h.text) << h.path;
  const std::string scalar = include + "/kernels/scalar.h";
  // Truncated, then edited, then removed: each time the next call restores the library's text.
  for (int damage = 0; damage < 3; ++damage) {
    if (damage == 0) std::filesystem::resize_file(scalar, 100);
    if (damage == 1) std::ofstream(scalar, std::ios::app) << "\n#error tampered\n";
    if (damage == 2) std::filesystem::remove(scalar);
    EXPECT_EQ(write_kernel_headers(dir_), include);
    EXPECT_EQ(read_text(scalar), find_header("kernels/scalar.h")->text) << "damage " << damage;
  }
  // Nothing else is left behind (no temporaries).
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/include")) files += e.is_regular_file();
  EXPECT_EQ(files, int(kernel_headers().size()));
}

TEST_F(KernelHeadersDir, AnUnwritableDirectoryIsASmeltError) {
  const std::string blocker = path("file");
  std::ofstream(blocker) << "not a directory";
  EXPECT_THROW(write_kernel_headers(blocker), Error);
}

}  // namespace
}  // namespace smelt::codegen::testing
