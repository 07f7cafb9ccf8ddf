// Kernel caches and tiered execution.
//
// A kernel's key is a hash of its canonical text (print_kernel: shapes, strides, dtypes, math),
// the compiler's path, version and flags, the CPU's features, smelt's version and the contents
// of the headers that generated kernels include (embedded in libsmelt and written into
// <dir>/include/<hash>/ before a compile: codegen/kernel_headers.h). Compiled
// kernels live
//   - in memory: an LRU of loaded kernels (KernelCacheOptions::memory_entries, default 1000);
//   - on disk, in `$SMELT_CACHE_DIR` (default ~/.cache/smelt): <key>.so, the shared object with
//     the keys it holds and a trailer (magic, sizes, checksum) appended after the ELF image, which
//     the loader ignores (codegen/disk_cache.h), plus the kernel's source <key>.cpp. Kernels
//     requested together (a plan's, get_many) compile in batches, several per compiler run, into
//     one shared object hard-linked under each key. An entry is written to a temporary file and
//     renamed into place, so processes compiling the same kernel at once each publish a complete
//     file and the last rename wins. An entry whose trailer does not match (truncated,
//     overwritten) or that dlopen refuses is reported once and rebuilt.
//
// Tiered execution: get() returns a KernelHandle at once. Its run() calls the compiled kernel
// when one is ready (memory or disk hit) and otherwise the tile interpreter while a small
// background pool compiles; the compiled entry then replaces the interpreter (an atomic swap).
// `SMELT_SYNC_COMPILE=1` compiles inside get() instead. With no C++ compiler on the machine
// everything runs on the interpreter, after one warning. `SMELT_DUMP_DIR` receives every kernel's
// source. `SMELT_DEBUG` >= 3 logs each kernel compiled or loaded from disk, with its source path
// (the per-compile summary of level 1 reads stats()).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "codegen/compiler.h"
#include "codegen/kernel_interpreter.h"
#include "codegen/loop_kernel.h"

namespace smelt::codegen {

struct KernelCacheOptions {
  std::string dir;                 // the disk cache; empty: $SMELT_CACHE_DIR, else ~/.cache/smelt
  int64_t memory_entries = 1000;   // $SMELT_KERNEL_CACHE_ENTRIES
  std::optional<std::string> cxx;  // the compiler; nullopt: $SMELT_CXX, else c++, else g++
  bool sync_compile = false;       // $SMELT_SYNC_COMPILE=1
  std::string dump_dir;            // $SMELT_DUMP_DIR: every kernel's source (compiled or not)
  int compile_threads = 2;         // the background pool
  double compile_timeout_seconds = 300;  // $SMELT_COMPILE_TIMEOUT: a compiler run past it is killed

  // The defaults with the environment applied (strictly: a bad value is a smelt::Error).
  static KernelCacheOptions from_env();
};

struct KernelCacheStats {
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t misses = 0;         // kernels compiled (or tried)
  int64_t compiler_runs = 0;  // compiler processes that succeeded (a batch of kernels each)
  int64_t compile_failures = 0;
  int64_t corrupt_entries = 0;  // disk entries found broken and rebuilt
  double compile_seconds = 0;   // total time in the compiler
};

// A compiled kernel, loaded.
struct CompiledKernel {
  std::shared_ptr<SharedLibrary> library;
  KernelEntry entry = nullptr;
  TileEntry tile_entry = nullptr;  // tiled kernels only
  std::string key;
  std::string source_path;  // the source it was compiled from, in the disk cache
};

// One kernel of tiered execution: its one execution owner (interpreted until compiled) and the
// one place a kernel is validated.
class KernelHandle {
 public:
  // Validates `kernel` (smelt::Error when invalid) and prepares its interpretation.
  explicit KernelHandle(LoopKernel kernel);

  // The compiled kernel if ready, else the interpreter. Reentrant.
  void run(void* const* args) const;
  // A tiled kernel's tile (loop_kernel.h), compiled or interpreted as run(). Reentrant.
  void run_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const;
  // The compiled entry, or nullptr while (or when) the kernel runs interpreted.
  KernelEntry compiled_entry() const { return entry_.load(std::memory_order_acquire); }
  // Blocks until a pending compile finished (or failed); returns at once otherwise.
  void wait() const;
  // Why the kernel stays interpreted ("" while compiling or once compiled).
  std::string error() const;
  const LoopKernel& kernel() const { return interpreted_.kernel(); }

 private:
  friend class KernelCache;
  void finish(std::shared_ptr<const CompiledKernel> compiled, std::string error);

  InterpretedKernel interpreted_;
  std::atomic<KernelEntry> entry_{nullptr};
  std::atomic<TileEntry> tile_entry_{nullptr};
  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  bool pending_ = false;
  std::shared_ptr<const CompiledKernel> compiled_;  // keeps the library loaded
  std::string error_;
};

class KernelCache {
 public:
  explicit KernelCache(KernelCacheOptions options = KernelCacheOptions::from_env());
  ~KernelCache();  // waits for the compiles in flight
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process's cache, from the environment.
  static KernelCache& global();

  // Tiered: a handle that runs at once (see the top). Validates the kernel (smelt::Error).
  std::shared_ptr<KernelHandle> get(const LoopKernel& kernel);
  // get() for several kernels at once (a plan's): the misses are compiled in batches, several
  // kernels per compiler run (one translation unit), the batches spread over the pool.
  std::vector<std::shared_ptr<KernelHandle>> get_many(
      const std::vector<const LoopKernel*>& kernels);
  // get_many() for handles the caller made (already validated, already interpreting): each is
  // finished with its compiled kernel, or queued to compile, and returned; or, when the same
  // kernel is already compiling, the handle that compiles it is returned in its place.
  std::vector<std::shared_ptr<KernelHandle>> compile_handles(
      std::vector<std::shared_ptr<KernelHandle>> handles);
  // Synchronous: the compiled kernel from memory, disk or the compiler; nullptr when there is no
  // compiler; a compiler failure is a smelt::Error with its messages.
  std::shared_ptr<const CompiledKernel> compile(const LoopKernel& kernel);

  // While held (a count: hold/release nest), the compiles get() and get_many() queue wait for the
  // release, so that the requests of a caller preparing many plans at once (the compile fuzzer)
  // meet in a few large batches: a compiler run costs about half a second before its first
  // kernel (headers, OpenMP, linking), each kernel in it a few tens of milliseconds. The caller
  // must release before it waits for a handle; ~KernelCache drops what is still held.
  void hold_compiles();
  void release_compiles();

  std::string key(const LoopKernel& kernel) const;  // 32 hex digits
  KernelCacheStats stats() const;
  const Compiler& compiler() const { return compiler_; }
  const KernelCacheOptions& options() const { return options_; }

 private:
  std::shared_ptr<const CompiledKernel> lookup_memory(const std::string& key);
  std::shared_ptr<const CompiledKernel> lookup_disk(const std::string& key, bool tiled);
  struct Job {
    const LoopKernel* kernel;
    std::string key;
  };
  struct Built {
    std::shared_ptr<const CompiledKernel> compiled;  // null when the compile failed: `failure`
    std::exception_ptr failure;
  };
  // Compiles the jobs as one translation unit into one shared object published under every key
  // (disk_cache.h); after a compiler error, each kernel alone, so the error names its kernel.
  std::vector<Built> build_batch(const std::vector<Job>& jobs);
  void remember(const std::shared_ptr<const CompiledKernel>& compiled);
  // Hands a build's result to its handle: the compiled kernel, or the interpreter with a warning.
  void finish_built(KernelHandle& handle, const Built& built);
  void enqueue(std::vector<std::pair<std::shared_ptr<KernelHandle>, std::string>> jobs);
  void worker();
  void warn_no_compiler();
  void dump(const LoopKernel& kernel, const std::string& key);  // SMELT_DUMP_DIR, once per kernel

  KernelCacheOptions options_;
  Compiler compiler_;
  std::string key_salt_;  // kernel_key_salt()
  int debug_ = 0;         // SMELT_DEBUG

  mutable std::mutex mutex_;                              // guards everything below
  std::list<std::shared_ptr<const CompiledKernel>> lru_;  // most recent first
  std::unordered_map<std::string, std::list<std::shared_ptr<const CompiledKernel>>::iterator>
      by_key_;
  std::unordered_map<std::string, std::shared_ptr<KernelHandle>> pending_;
  std::set<std::string> reported_corrupt_;
  std::set<std::string> dumped_;
  bool warned_no_compiler_ = false;
  KernelCacheStats stats_;
  // the background pool
  std::list<std::pair<std::shared_ptr<KernelHandle>, std::string>> queue_;
  std::vector<std::thread> workers_;
  int busy_workers_ = 0;  // workers compiling a batch now
  std::condition_variable queue_cv_;
  bool stopping_ = false;
  int held_ = 0;  // hold_compiles() without release_compiles()
};

// The disk cache as `smelt cache stats|clear` sees it.
struct DiskCacheSummary {
  std::string dir;
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t compiles = 0;  // from the cache's event log: compiles, over all processes
  double compile_seconds = 0;
  int64_t disk_hits = 0;
  int64_t corrupt_entries = 0;
};
std::string default_cache_dir();  // $SMELT_CACHE_DIR, else ~/.cache/smelt
// What -march=native compiles for: the CPU's model and feature flags (part of every cache key).
std::string cpu_features();
// The revision of the generated code: a hash of the emitter's sources and of the headers the
// generated kernels include, taken when smelt was built (cmake/emitter_revision.cmake).
const char* emitter_revision();
// Everything in a kernel's cache key but the kernel's own text: the compiler (path, version,
// flags), the CPU, smelt's version, the hash of the headers the kernels will include
// (kernel_headers_hash()), and the emitter's revision (KernelCache passes emitter_revision(); tests
// pass others).
std::string kernel_key_salt(const Compiler& compiler, const std::string& cpu,
                            const std::string& headers_hash, const std::string& emitter_revision);
// A kernel's key under `salt`: 32 hex digits.
std::string kernel_key(const std::string& salt, const LoopKernel& kernel);
DiskCacheSummary disk_cache_summary(const std::string& dir);
// Removes the entries, sources, temporaries, the event log and the written kernel headers
// (include/<hash>/); returns how many files it removed.
int64_t disk_cache_clear(const std::string& dir);

}  // namespace smelt::codegen
