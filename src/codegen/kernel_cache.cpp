#include "codegen/kernel_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/env.h"
#include "codegen/disk_cache.h"
#include "codegen/emit_cpp.h"
#include "codegen/emitter_revision.h"  // generated (cmake/emitter_revision.cmake)
#include "codegen/kernel_headers.h"
#include "codegen/kernel_interpreter.h"
#include "smelt/error.h"

#ifndef SMELT_VERSION
#define SMELT_VERSION "unknown"
#endif

namespace smelt::codegen {
namespace {

using namespace disk;

// Kernels compiled in one translation unit at most (a batch's source and object grow with it).
constexpr size_t kMaxBatch = 32;

std::string safe_name(const std::string& name) {
  std::string s;
  for (char c : name.substr(0, 80)) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s.empty() ? "kernel" : s;
}

}  // namespace

// What -march=native compiles for: the CPU's model and feature flags.
std::string cpu_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = line;
  }
  if (!flags.empty()) return model + "\n" + flags;
  std::string f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) f += " avx2";
  if (__builtin_cpu_supports("fma")) f += " fma";
  if (__builtin_cpu_supports("avx512f")) f += " avx512f";
#endif
  return "builtin:" + f;
}

const char* emitter_revision() { return kEmitterRevision; }

std::string kernel_key_salt(const Compiler& compiler, const std::string& cpu,
                            const std::string& headers_hash, const std::string& emitter_revision) {
  std::string flags;
  for (const std::string& f : compiler.flags) flags += f + " ";
  return "compiler " + compiler.path + "\nversion " + compiler.version + "\nflags " + flags +
         "\ncpu " + cpu + "\nsmelt " + SMELT_VERSION + "\nheaders " + headers_hash + "\nemitter " +
         emitter_revision + "\n";
}

std::string kernel_key(const std::string& salt, const LoopKernel& kernel) {
  return hash_hex(salt + print_kernel(kernel));
}

KernelCacheOptions KernelCacheOptions::from_env() {
  KernelCacheOptions o;
  o.dir = default_cache_dir();
  o.memory_entries = env_int("SMELT_KERNEL_CACHE_ENTRIES", o.memory_entries, 1, int64_t(1) << 30);
  o.sync_compile = env_int("SMELT_SYNC_COMPILE", 0, 0, 1) == 1;
  o.compile_timeout_seconds = double(env_int("SMELT_COMPILE_TIMEOUT", 300, 1, 86400));
  o.dump_dir = env_text("SMELT_DUMP_DIR").value_or("");
  return o;
}

namespace {

LoopKernel validated(LoopKernel kernel) {
  validate(kernel);
  return kernel;
}

}  // namespace

KernelHandle::KernelHandle(LoopKernel kernel) : interpreted_(validated(std::move(kernel))) {}

void KernelHandle::run(void* const* args) const {
  if (KernelEntry entry = entry_.load(std::memory_order_acquire)) return entry(args);
  interpreted_.run(args);
}

void KernelHandle::run_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0,
                            int64_t c1) const {
  if (TileEntry entry = tile_entry_.load(std::memory_order_acquire))
    return entry(args, r0, r1, c0, c1);
  interpreted_.run_tile(args, r0, r1, c0, c1);
}

void KernelHandle::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return !pending_; });
}

std::string KernelHandle::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void KernelHandle::finish(std::shared_ptr<const CompiledKernel> compiled, std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    compiled_ = compiled;
    error_ = std::move(error);
    pending_ = false;
    if (compiled) {
      tile_entry_.store(compiled->tile_entry, std::memory_order_release);
      entry_.store(compiled->entry, std::memory_order_release);
    }
  }
  done_cv_.notify_all();
}

KernelCache::KernelCache(KernelCacheOptions options) : options_(std::move(options)) {
  if (options_.dir.empty()) options_.dir = default_cache_dir();
  SMELT_CHECK(options_.memory_entries >= 1)
      << "kernel cache: memory_entries " << options_.memory_entries << "; valid: at least 1";
  compiler_ = find_compiler(options_.cxx);
  debug_ = int(env_int("SMELT_DEBUG", 0, 0, 4));
  // The headers the kernels #include are the library's own (kernel_headers.h); their hash is also
  // in emitter_revision(), and is named here as well so that the salt says what it covers.
  key_salt_ = kernel_key_salt(compiler_, cpu_features(), kernel_headers_hash(), emitter_revision());
}

KernelCache::~KernelCache() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

KernelCache& KernelCache::global() {
  static KernelCache cache;
  return cache;
}

void KernelCache::hold_compiles() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++held_;
}

void KernelCache::release_compiles() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SMELT_INTERNAL_CHECK(held_ > 0) << "KernelCache::release_compiles without hold_compiles";
    --held_;
  }
  queue_cv_.notify_all();
}

std::string KernelCache::key(const LoopKernel& kernel) const {
  return kernel_key(key_salt_, kernel);
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCache::warn_no_compiler() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (warned_no_compiler_) return;
  warned_no_compiler_ = true;
  std::fprintf(stderr,
               "smelt: warning: no C++ compiler (%s); fused kernels run on the interpreter\n",
               compiler_.missing.c_str());
}

std::shared_ptr<const CompiledKernel> KernelCache::lookup_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.memory_hits;
  return *it->second;
}

void KernelCache::remember(const std::shared_ptr<const CompiledKernel>& compiled) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_key_.count(compiled->key)) return;
  lru_.push_front(compiled);
  by_key_[compiled->key] = lru_.begin();
  while (int64_t(lru_.size()) > options_.memory_entries) {
    by_key_.erase(lru_.back()->key);
    lru_.pop_back();  // handles that use it keep the library loaded
  }
}

std::shared_ptr<const CompiledKernel> KernelCache::lookup_disk(const std::string& key, bool tiled) {
  const std::string so = options_.dir + "/" + key + ".so";
  std::string bytes;
  if (!read_file(so, &bytes)) return nullptr;
  std::string problem = check_entry(bytes, key);
  std::shared_ptr<CompiledKernel> compiled;
  if (problem.empty()) {
    try {
      compiled = std::make_shared<CompiledKernel>();
      compiled->library = SharedLibrary::open(so);
      compiled->entry =
          reinterpret_cast<KernelEntry>(compiled->library->symbol("smelt_kernel_" + key));
      if (tiled) {
        compiled->tile_entry =
            reinterpret_cast<TileEntry>(compiled->library->symbol("smelt_kernel_" + key + "_tile"));
      }
      compiled->key = key;
      compiled->source_path = options_.dir + "/" + key + ".cpp";
    } catch (const Error& e) {
      problem = e.what();
      compiled = nullptr;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!problem.empty()) {
    ++stats_.corrupt_entries;
    if (reported_corrupt_.insert(key).second) {
      std::fprintf(stderr, "smelt: warning: kernel cache entry %s is corrupt (%s); rebuilding it\n",
                   so.c_str(), problem.c_str());
    }
    ::unlink(so.c_str());
    log_event(options_.dir, "corrupt");
    return nullptr;
  }
  ++stats_.disk_hits;
  log_event(options_.dir, "disk_hit");
  if (debug_ >= 3)
    std::fprintf(stderr, "smelt: kernel %s: disk cache hit %s\n", key.c_str(), so.c_str());
  return compiled;
}

std::vector<KernelCache::Built> KernelCache::build_batch(const std::vector<Job>& jobs) {
  SMELT_INTERNAL_CHECK(!jobs.empty()) << "kernel cache: an empty batch";
  make_dirs(options_.dir);
  std::vector<std::string> sources, keys;
  std::string source;
  for (const Job& job : jobs) {
    sources.push_back(emit_cpp(*job.kernel, "smelt_kernel_" + job.key));
    source += sources.back() + "\n";  // each kernel's source guards what it shares (emit_cpp)
    keys.push_back(job.key);
  }
  // Checked before every batch: the cache dir may have been cleared or tampered with since. When
  // they cannot be written, no kernel of the batch can compile: one failure for all of them.
  std::string include_dir;
  try {
    include_dir = write_kernel_headers(options_.dir);
  } catch (const Error&) {
    const std::exception_ptr failure = std::current_exception();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.misses += int64_t(jobs.size());
    ++stats_.compile_failures;
    return std::vector<Built>(jobs.size(), Built{nullptr, failure});
  }
  const std::string tmp = options_.dir + "/" + keys[0] + unique_suffix();
  const auto start = std::chrono::steady_clock::now();
  try {
    compile_shared_object(compiler_, source, tmp + ".cpp", tmp + ".so", include_dir,
                          options_.compile_timeout_seconds);
  } catch (const Error&) {
    ::unlink((tmp + ".cpp").c_str());
    ::unlink((tmp + ".so").c_str());
    if (jobs.size() >
        1) {  // each kernel alone: the error then names its kernel, the others compile
      std::vector<Built> out;
      for (const Job& job : jobs) out.push_back(build_batch({job})[0]);
      return out;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    ++stats_.compile_failures;
    return {Built{nullptr, std::current_exception()}};
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unlink((tmp + ".cpp").c_str());
  publish_entry(options_.dir, tmp + ".so", keys);
  for (size_t i = 0; i < jobs.size(); ++i) {  // each kernel's own source, for people and dumps
    const std::string stem = options_.dir + "/" + keys[i], part = stem + unique_suffix();
    write_file(part, sources[i]);
    ::rename(part.c_str(), (stem + ".cpp").c_str());
    log_event(options_.dir, "compile " + std::to_string(seconds / double(jobs.size())));
  }
  auto library = SharedLibrary::open(options_.dir + "/" + keys[0] + ".so");
  std::vector<Built> out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string symbol = "smelt_kernel_" + keys[i];
    auto compiled = std::make_shared<CompiledKernel>();
    compiled->library = library;
    compiled->entry = reinterpret_cast<KernelEntry>(library->symbol(symbol));
    if (jobs[i].kernel->tiled)
      compiled->tile_entry = reinterpret_cast<TileEntry>(library->symbol(symbol + "_tile"));
    compiled->key = keys[i];
    compiled->source_path = options_.dir + "/" + keys[i] + ".cpp";
    out.push_back(Built{compiled, nullptr});
    if (debug_ >= 3) {
      std::fprintf(stderr,
                   "smelt: kernel %s (%s) compiled in a batch of %zu in %.3f s, source %s\n",
                   jobs[i].kernel->name.c_str(), keys[i].c_str(), jobs.size(), seconds,
                   compiled->source_path.c_str());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.misses += int64_t(jobs.size());
  stats_.compile_seconds += seconds;
  ++stats_.compiler_runs;
  return out;
}

void KernelCache::dump(const LoopKernel& kernel, const std::string& key) {
  if (options_.dump_dir.empty()) return;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = dumped_.empty();
    if (!dumped_.insert(key).second) return;
  }
  make_dirs(options_.dump_dir);
  if (first)
    write_kernel_headers(options_.dump_dir);  // what the sources #include, to compile them by hand
  const std::string path = options_.dump_dir + "/" + safe_name(kernel.name) + "_" + key + ".cpp";
  write_file(path, emit_cpp(kernel, "smelt_kernel_" + key));
  if (debug_ >= 3)
    std::fprintf(stderr, "smelt: kernel %s source %s\n", kernel.name.c_str(), path.c_str());
}

std::shared_ptr<const CompiledKernel> KernelCache::compile(const LoopKernel& kernel) {
  validate(kernel);
  const std::string k = key(kernel);
  dump(kernel, k);
  if (!compiler_.available()) {
    warn_no_compiler();
    return nullptr;
  }
  if (auto hit = lookup_memory(k)) return hit;
  auto compiled = lookup_disk(k, kernel.tiled);
  if (!compiled) {
    Built built = build_batch({Job{&kernel, k}})[0];
    if (built.failure) std::rethrow_exception(built.failure);
    compiled = built.compiled;
  }
  remember(compiled);
  return compiled;
}

std::shared_ptr<KernelHandle> KernelCache::get(const LoopKernel& kernel) {
  return get_many({&kernel})[0];
}

std::vector<std::shared_ptr<KernelHandle>> KernelCache::get_many(
    const std::vector<const LoopKernel*>& kernels) {
  std::vector<std::shared_ptr<KernelHandle>> handles;
  for (const LoopKernel* kernel : kernels) handles.push_back(std::make_shared<KernelHandle>(*kernel));
  return compile_handles(std::move(handles));
}

std::vector<std::shared_ptr<KernelHandle>> KernelCache::compile_handles(
    std::vector<std::shared_ptr<KernelHandle>> handles) {
  std::vector<std::pair<std::shared_ptr<KernelHandle>, std::string>> misses;
  for (std::shared_ptr<KernelHandle>& handle : handles) {
    const LoopKernel& kernel = handle->kernel();
    const std::string k = key(kernel);
    dump(kernel, k);
    if (!compiler_.available()) {
      warn_no_compiler();
      handle->finish(nullptr, "no C++ compiler: " + compiler_.missing);
      continue;
    }
    if (auto hit = lookup_memory(k)) {
      handle->finish(hit, "");
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pending_.find(k);
      if (it != pending_.end()) {  // the same computation, already compiling
        handle = it->second;
        continue;
      }
    }
    if (auto hit = lookup_disk(k, kernel.tiled)) {
      remember(hit);
      handle->finish(hit, "");
      continue;
    }
    bool repeated = false;  // the same kernel twice in this request: one compile
    for (auto& [h, key] : misses) {
      if (key == k) {
        handle = h;
        repeated = true;
        break;
      }
    }
    if (!repeated) misses.emplace_back(handle, k);
  }
  if (misses.empty()) return handles;
  if (options_.sync_compile) {
    std::vector<Job> jobs;
    for (const auto& [h, k] : misses) jobs.push_back(Job{&h->kernel(), k});
    std::vector<Built> built = build_batch(jobs);
    for (size_t i = 0; i < misses.size(); ++i) {
      // A failure falls back to the interpreter, as a background compile's does (finish_built).
      finish_built(*misses[i].first, built[i]);
    }
    return handles;
  }
  enqueue(std::move(misses));
  return handles;
}

void KernelCache::finish_built(KernelHandle& handle, const Built& built) {
  std::string error;
  if (built.compiled) {
    remember(built.compiled);
  } else {
    try {
      std::rethrow_exception(built.failure);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::fprintf(stderr, "smelt: warning: kernel %s stays on the interpreter: %s\n",
                 handle.kernel().name.c_str(), error.c_str());
  }
  handle.finish(built.compiled, error);
}

void KernelCache::enqueue(std::vector<std::pair<std::shared_ptr<KernelHandle>, std::string>> jobs) {
  for (auto& [handle, key] : jobs) {
    std::lock_guard<std::mutex> hl(handle->mutex_);
    handle->pending_ = true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [handle, key] : jobs) {
    pending_[key] = handle;
    queue_.emplace_back(std::move(handle), std::move(key));
  }
  while (int(workers_.size()) < std::max(1, options_.compile_threads) &&
         workers_.size() < queue_.size()) {
    workers_.emplace_back([this] { worker(); });
  }
  queue_cv_.notify_all();
}

void KernelCache::worker() {
  for (;;) {
    std::vector<std::pair<std::shared_ptr<KernelHandle>, std::string>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && held_ == 0); });
      if (stopping_) {  // the cache goes away: what has not started stays interpreted
        for (auto& [h, k] : queue_)
          h->finish(nullptr, "the kernel cache shut down before compiling it");
        queue_.clear();
        return;
      }
      // An even share of the queue per free worker: one compiler run per share, run in parallel.
      const size_t free_workers = std::max<size_t>(1, workers_.size() - size_t(busy_workers_));
      const size_t take = std::min(kMaxBatch, (queue_.size() + free_workers - 1) / free_workers);
      ++busy_workers_;
      for (size_t i = 0; i < take; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<Job> jobs;
    for (const auto& [h, k] : batch) jobs.push_back(Job{&h->kernel(), k});
    std::vector<Built> built;
    try {
      built = build_batch(jobs);
    } catch (const std::exception&) {  // publishing failed: the whole batch stays interpreted
      built.assign(jobs.size(), Built{nullptr, std::current_exception()});
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.erase(batch[i].second);
      }
      finish_built(*batch[i].first, built[i]);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_workers_;
  }
}

}  // namespace smelt::codegen
