// Aligned buffers for tensor storage, with a cache of mid-size and large blocks.
//
// glibc serves every block above 32 MiB with a fresh mmap, so each new large tensor pays a page
// fault per page on its first write — for a 64 MB elementwise output several times the cost of
// the kernel. Training and inference loops allocate the same sizes step after step, so freed
// blocks from 64 KiB up are kept (by exact rounded size: pages, or 2 MiB from 2 MiB up) and
// handed out again; small blocks go straight to malloc, which already reuses them. Large blocks are 2 MiB aligned and backed by transparent
// huge pages, so even a first touch costs 512 times fewer faults.
//
// The cache holds at most SMELT_BUFFER_CACHE_MB megabytes (default 1024; 0 disables it).
#pragma once

#include <cstddef>

namespace smelt {

// At least `bytes` (zero is fine), aligned to 64 bytes; throws std::bad_alloc.
void* buffer_alloc(size_t bytes);
// Frees a buffer from buffer_alloc(bytes) (the same `bytes`).
void buffer_free(void* p, size_t bytes);
// Returns every cached block to the system.
void buffer_cache_clear();
// Bytes currently held by the cache (not in use by any tensor).
size_t buffer_cache_bytes();
// The cache's limit from SMELT_BUFFER_CACHE_MB, read once; a smelt::Error for a bad value.
size_t buffer_cache_limit();

}  // namespace smelt
