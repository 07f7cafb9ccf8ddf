#include "codegen/kernel_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/env.h"
#include "codegen/emit_cpp.h"
#include "codegen/kernel_interpreter.h"
#include "smelt/error.h"

#ifndef SMELT_VERSION
#define SMELT_VERSION "unknown"
#endif

namespace smelt::codegen {
namespace {

constexpr char kMagic[8] = {'S', 'M', 'E', 'L', 'T', 'K', '0', '1'};
constexpr size_t kKeyChars = 32;
// Appended after the ELF image: the loader maps by program headers and ignores trailing bytes.
struct Trailer {
  char magic[8];
  uint64_t size;      // bytes of the image before the trailer
  uint64_t checksum;  // fnv1a over those bytes
  char key[kKeyChars];
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t mix(uint64_t x) {  // a bijective finalizer (splitmix64's), so each output bit depends on all
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 128 bits from two differently seeded passes: plenty for a cache key that nobody attacks.
std::string hash_hex(const std::string& text) {
  uint64_t a = mix(fnv1a(text.data(), text.size()));
  uint64_t b = mix(fnv1a(text.data(), text.size(), 0x84222325cbf29ce4ull) ^ text.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, a, b);
  return buf;
}

// What -march=native compiles for: the CPU's model and feature flags.
std::string cpu_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) flags = line;
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

void make_dirs(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  for (std::string part; std::getline(parts, part, '/');) {
    partial += part + "/";
    if (part.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      SMELT_CHECK(false) << "kernel cache: cannot create directory " << partial << ": " << std::strerror(errno);
    }
  }
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  SMELT_CHECK(out) << "kernel cache: cannot write " << path << ": " << std::strerror(errno);
}

// "" when `bytes` is an intact entry for `key`, else what is wrong with it.
std::string check_entry(const std::string& bytes, const std::string& key) {
  if (bytes.size() < sizeof(Trailer)) return "shorter than its trailer (truncated)";
  Trailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof t, sizeof t);
  if (std::memcmp(t.magic, kMagic, sizeof kMagic) != 0) return "no trailer (truncated or overwritten)";
  if (t.size != bytes.size() - sizeof t) return "size does not match its trailer (truncated)";
  if (std::string(t.key, kKeyChars) != key) return "trailer names another key";
  if (t.checksum != fnv1a(bytes.data(), t.size)) return "checksum mismatch";
  return "";
}

// One line per event, appended with O_APPEND (atomic for short writes), for `smelt cache stats`.
void log_event(const std::string& dir, const std::string& line) {
  int fd = ::open((dir + "/events.log").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;  // statistics are best effort
  std::string l = line + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd, l.data(), l.size());
  ::close(fd);
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

std::string safe_name(const std::string& name) {
  std::string s;
  for (char c : name.substr(0, 80)) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s.empty() ? "kernel" : s;
}

}  // namespace

std::string default_cache_dir() {
  if (auto dir = env_text("SMELT_CACHE_DIR")) return *dir;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/smelt";
}

KernelCacheOptions KernelCacheOptions::from_env() {
  KernelCacheOptions o;
  o.dir = default_cache_dir();
  o.memory_entries = env_int("SMELT_KERNEL_CACHE_ENTRIES", o.memory_entries, 1, int64_t(1) << 30);
  o.sync_compile = env_int("SMELT_SYNC_COMPILE", 0, 0, 1) == 1;
  o.dump_dir = env_text("SMELT_DUMP_DIR").value_or("");
  return o;
}

void KernelHandle::run(void* const* args) const {
  if (KernelEntry entry = entry_.load(std::memory_order_acquire)) return entry(args);
  interpreted_.run(args);
}

void KernelHandle::run_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
  if (TileEntry entry = tile_entry_.load(std::memory_order_acquire)) return entry(args, r0, r1, c0, c1);
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
  SMELT_CHECK(options_.memory_entries >= 1) << "kernel cache: memory_entries " << options_.memory_entries
                                            << "; valid: at least 1";
  compiler_ = find_compiler(options_.cxx);
  debug_ = int(env_int("SMELT_DEBUG", 0, 0, 4));
  std::string flags;
  for (const std::string& f : compiler_.flags) flags += f + " ";
  // The scalar math the kernels #include: a fix to it must not meet kernels compiled before.
  std::string scalar_header;
  read_file(codegen_include_dir() + "/kernels/scalar.h", &scalar_header);
  key_salt_ = "compiler " + compiler_.path + "\nversion " + compiler_.version + "\nflags " + flags + "\ncpu " +
              cpu_features() + "\nsmelt " + SMELT_VERSION + "\nscalar.h " + hash_hex(scalar_header) +
              "\nemit_cpp " + std::to_string(kEmitCppRevision) + "\n";
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

std::string KernelCache::key(const LoopKernel& kernel) const { return hash_hex(key_salt_ + print_kernel(kernel)); }

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCache::warn_no_compiler() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (warned_no_compiler_) return;
  warned_no_compiler_ = true;
  std::fprintf(stderr, "smelt: warning: no C++ compiler (%s); fused kernels run on the interpreter\n",
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
      compiled->entry = reinterpret_cast<KernelEntry>(compiled->library->symbol("smelt_kernel_" + key));
      if (tiled) {
        compiled->tile_entry = reinterpret_cast<TileEntry>(compiled->library->symbol("smelt_kernel_" + key + "_tile"));
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
      std::fprintf(stderr, "smelt: warning: kernel cache entry %s is corrupt (%s); rebuilding it\n", so.c_str(),
                   problem.c_str());
    }
    ::unlink(so.c_str());
    log_event(options_.dir, "corrupt");
    return nullptr;
  }
  ++stats_.disk_hits;
  log_event(options_.dir, "disk_hit");
  if (debug_ >= 3) std::fprintf(stderr, "smelt: kernel %s: disk cache hit %s\n", key.c_str(), so.c_str());
  return compiled;
}

std::shared_ptr<const CompiledKernel> KernelCache::build(const LoopKernel& kernel, const std::string& key) {
  const std::string symbol = "smelt_kernel_" + key;
  const std::string source = emit_cpp(kernel, symbol);
  make_dirs(options_.dir);
  const std::string stem = options_.dir + "/" + key, tmp = stem + unique_suffix();
  auto start = std::chrono::steady_clock::now();
  try {
    compile_shared_object(compiler_, source, tmp + ".cpp", tmp + ".so");
  } catch (...) {
    ::unlink((tmp + ".cpp").c_str());
    ::unlink((tmp + ".so").c_str());
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    ++stats_.compile_failures;
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string bytes;
  SMELT_CHECK(read_file(tmp + ".so", &bytes)) << "kernel cache: cannot read " << tmp << ".so";
  Trailer t;
  std::memcpy(t.magic, kMagic, sizeof kMagic);
  t.size = bytes.size();
  t.checksum = fnv1a(bytes.data(), bytes.size());
  std::memcpy(t.key, key.data(), kKeyChars);
  bytes.append(reinterpret_cast<const char*>(&t), sizeof t);
  write_file(tmp + ".so", bytes);
  // Publish: each rename is atomic, so readers see a whole old or a whole new file.
  SMELT_CHECK(::rename((tmp + ".so").c_str(), (stem + ".so").c_str()) == 0)
      << "kernel cache: cannot rename " << tmp << ".so: " << std::strerror(errno);
  ::rename((tmp + ".cpp").c_str(), (stem + ".cpp").c_str());
  log_event(options_.dir, "compile " + std::to_string(seconds));
  auto compiled = std::make_shared<CompiledKernel>();
  compiled->library = SharedLibrary::open(stem + ".so");
  compiled->entry = reinterpret_cast<KernelEntry>(compiled->library->symbol(symbol));
  if (kernel.tiled) compiled->tile_entry = reinterpret_cast<TileEntry>(compiled->library->symbol(symbol + "_tile"));
  compiled->key = key;
  compiled->source_path = stem + ".cpp";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    stats_.compile_seconds += seconds;
  }
  if (debug_ >= 3) {
    std::fprintf(stderr, "smelt: kernel %s (%s) compiled in %.3f s, source %s\n", kernel.name.c_str(), key.c_str(),
                 seconds, compiled->source_path.c_str());
  }
  return compiled;
}

void KernelCache::dump(const LoopKernel& kernel, const std::string& key) {
  if (options_.dump_dir.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!dumped_.insert(key).second) return;
  }
  make_dirs(options_.dump_dir);
  const std::string path = options_.dump_dir + "/" + safe_name(kernel.name) + "_" + key + ".cpp";
  write_file(path, emit_cpp(kernel, "smelt_kernel_" + key));
  if (debug_ >= 3) std::fprintf(stderr, "smelt: kernel %s source %s\n", kernel.name.c_str(), path.c_str());
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
  if (!compiled) compiled = build(kernel, k);
  remember(compiled);
  return compiled;
}

std::shared_ptr<KernelHandle> KernelCache::get(const LoopKernel& kernel) {
  validate(kernel);
  const std::string k = key(kernel);
  dump(kernel, k);
  auto handle = std::make_shared<KernelHandle>(kernel);
  if (!compiler_.available()) {
    warn_no_compiler();
    handle->finish(nullptr, "no C++ compiler: " + compiler_.missing);
    return handle;
  }
  if (auto hit = lookup_memory(k)) {
    handle->finish(hit, "");
    return handle;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(k);
    if (it != pending_.end()) return it->second;  // the same computation, already compiling
  }
  if (auto hit = lookup_disk(k, kernel.tiled)) {
    remember(hit);
    handle->finish(hit, "");
    return handle;
  }
  if (options_.sync_compile) {
    auto compiled = build(kernel, k);
    remember(compiled);
    handle->finish(compiled, "");
    return handle;
  }
  enqueue(handle, k);
  return handle;
}

void KernelCache::enqueue(std::shared_ptr<KernelHandle> handle, std::string key) {
  {
    std::lock_guard<std::mutex> hl(handle->mutex_);
    handle->pending_ = true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_[key] = handle;
  queue_.emplace_back(std::move(handle), std::move(key));
  if (int(workers_.size()) < std::max(1, options_.compile_threads) && workers_.size() < queue_.size()) {
    workers_.emplace_back([this] { worker(); });
  }
  queue_cv_.notify_one();
}

void KernelCache::worker() {
  for (;;) {
    std::shared_ptr<KernelHandle> handle;
    std::string key;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) {  // the cache goes away: what has not started stays interpreted
        for (auto& [h, k] : queue_) h->finish(nullptr, "the kernel cache shut down before compiling it");
        queue_.clear();
        return;
      }
      handle = std::move(queue_.front().first);
      key = std::move(queue_.front().second);
      queue_.pop_front();
    }
    std::shared_ptr<const CompiledKernel> compiled;
    std::string error;
    try {
      compiled = build(handle->kernel(), key);
      remember(compiled);
    } catch (const std::exception& e) {
      error = e.what();
      std::fprintf(stderr, "smelt: warning: kernel %s stays on the interpreter: %s\n",
                   handle->kernel().name.c_str(), e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.erase(key);
    }
    handle->finish(compiled, error);
  }
}

DiskCacheSummary disk_cache_summary(const std::string& dir) {
  DiskCacheSummary s;
  s.dir = dir;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      struct stat st;
      if (::stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (name.size() == kKeyChars + 3 && name.compare(kKeyChars, 3, ".so") == 0) ++s.entries;
      s.bytes += st.st_size;
    }
    ::closedir(d);
  }
  std::ifstream log(dir + "/events.log");
  for (std::string line; std::getline(log, line);) {
    if (line.rfind("compile ", 0) == 0) {
      ++s.compiles;
      s.compile_seconds += std::atof(line.c_str() + 8);
    } else if (line == "disk_hit") {
      ++s.disk_hits;
    } else if (line == "corrupt") {
      ++s.corrupt_entries;
    }
  }
  return s;
}

int64_t disk_cache_clear(const std::string& dir) {
  int64_t removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  auto ours = [](const std::string& name) {
    if (name == "events.log") return true;
    if (name.size() < kKeyChars + 3) return false;
    for (size_t i = 0; i < kKeyChars; ++i) {
      if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
    }
    std::string rest = name.substr(kKeyChars);
    return rest == ".so" || rest == ".cpp" || rest.rfind(".tmp.", 0) == 0;
  };
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (ours(name) && ::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace smelt::codegen
