#include "base/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "base/env.h"

namespace smelt {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kPage = size_t(4) << 10;
// Blocks this large are cached and huge-page backed.
constexpr size_t kLargeBlock = kHugePage;
// Blocks from here up to kLargeBlock are cached too, rounded to pages. glibc maps blocks from
// 128 KiB (its starting mmap threshold) afresh and trims the heap top above 128 KiB, so without
// the cache an eager training step pays page faults for every mid-size activation it allocates
// (a 1.5x slower digits CNN step once kernels stopped allocating their own outputs).
// Smaller blocks are malloc's business: it reuses them well.
constexpr size_t kCachedBlock = size_t(64) << 10;

// 16 TiB: far beyond any machine's memory, and the byte count cannot overflow.
constexpr int64_t kMaxCacheMB = int64_t(1) << 24;

// SMELT_BUFFER_CACHE_MB, read (and a bad value reported) at the first cached allocation, which
// can throw; buffer_free runs in destructors and must not, and it only ever sees cached blocks
// after that first allocation.
size_t cache_limit_bytes() {
  static const size_t limit = size_t(env_int("SMELT_BUFFER_CACHE_MB", 1024, 0, kMaxCacheMB)) << 20;
  return limit;
}

struct BlockCache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  size_t cached_bytes = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: tensors may die during exit
  return *c;
}

size_t rounded(size_t bytes) {
  if (bytes >= kLargeBlock) return (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes >= kCachedBlock) return (bytes + kPage - 1) / kPage * kPage;
  size_t r = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return r == 0 ? kAlignment : r;
}

}  // namespace

void* buffer_alloc(size_t bytes) {
  const size_t size = rounded(bytes);
  if (size < kCachedBlock) {
    void* p = std::aligned_alloc(kAlignment, size);
    if (!p) throw std::bad_alloc();
    return p;
  }
  cache_limit_bytes();
  {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.cached_bytes -= size;
      return p;
    }
  }
  const bool large = size >= kLargeBlock;
  const size_t alignment = large ? kHugePage : kAlignment;
  void* p = std::aligned_alloc(alignment, size);
  if (!p) {
    buffer_cache_clear();  // cached blocks may be what stands between us and the memory
    p = std::aligned_alloc(alignment, size);
    if (!p) throw std::bad_alloc();
  }
  if (large) madvise(p, size, MADV_HUGEPAGE);  // a hint: failure only costs speed
  return p;
}

void buffer_free(void* p, size_t bytes) {
  if (!p) return;
  const size_t size = rounded(bytes);
  if (size >= kCachedBlock) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.cached_bytes + size <= cache_limit_bytes()) {
      c.free_blocks.emplace(size, p);
      c.cached_bytes += size;
      return;
    }
  }
  std::free(p);
}

void buffer_cache_clear() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

size_t buffer_cache_limit() { return cache_limit_bytes(); }

size_t buffer_cache_bytes() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.cached_bytes;
}

}  // namespace smelt
