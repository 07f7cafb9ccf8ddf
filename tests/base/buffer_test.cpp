// The buffer cache: mid-size and large blocks are kept and handed out again by exact rounded
// size; small blocks go to malloc; the cache never holds more than its limit.
#include <gtest/gtest.h>

#include <cstring>

#include "base/buffer.h"

namespace smelt {
namespace {

TEST(BufferCache, MidSizeBlocksAreReused) {
  buffer_cache_clear();
  const size_t bytes = 100 * 1024 + 3;  // mid-size: cached, rounded up to whole 4 KiB pages
  void* a = buffer_alloc(bytes);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, bytes);
  buffer_free(a, bytes);
  EXPECT_EQ(buffer_cache_bytes(), size_t(26) * 4096);
  void* b = buffer_alloc(bytes - 1);  // the same rounded size: the cached block comes back
  EXPECT_EQ(b, a);
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  buffer_free(b, bytes - 1);
  buffer_cache_clear();
  EXPECT_EQ(buffer_cache_bytes(), 0u);
}

TEST(BufferCache, SmallBlocksAreNotCached) {
  buffer_cache_clear();
  void* a = buffer_alloc(1000);
  ASSERT_NE(a, nullptr);
  buffer_free(a, 1000);
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  void* z = buffer_alloc(0);  // zero bytes is a valid request
  ASSERT_NE(z, nullptr);
  buffer_free(z, 0);
}

TEST(BufferCache, LargeBlocksRoundToHugePages) {
  buffer_cache_clear();
  const size_t bytes = (size_t(2) << 20) + 1;
  void* a = buffer_alloc(bytes);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (size_t(2) << 20), 0u);
  buffer_free(a, bytes);
  EXPECT_EQ(buffer_cache_bytes(), size_t(4) << 20);
  EXPECT_LE(buffer_cache_bytes(), buffer_cache_limit());
  buffer_cache_clear();
}

}  // namespace
}  // namespace smelt
