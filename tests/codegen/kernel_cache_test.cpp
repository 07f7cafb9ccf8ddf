// The kernel caches: tiered execution, the disk cache under concurrent processes, corrupt entries,
// a machine without a compiler, compiler errors, LRU eviction.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/kernel_builder.h"
#include "codegen/kernel_headers.h"

namespace smelt::codegen::testing {
namespace {

using kernels::ScalarFn;

// out = tanh(x * c) over n elements; `c` makes each test's kernel its own.
KernelBuilder scaled_tanh(int64_t rows, int64_t cols, double c) {
  KernelBuilder kb({rows}, {cols});
  int x = kb.load(kb.access(kb.arg(DType::Float32, rows * cols, false), 0, {cols}, {1}));
  int y = kb.call(ScalarFn::tanh, {kb.call(ScalarFn::mul, {x, kb.constant(DType::Float32, c)})});
  kb.store(y, kb.access(kb.arg(DType::Float32, rows * cols, true), 0, {cols}, {1}));
  kb.k.name = "mul_tanh";
  kb.k.comment = "fused: mul, tanh";
  return kb;
}

// Runs `run` on x and a fresh output; true when the output is eager tanh(x * c), bit for bit.
template <class Run>
bool runs_correctly(Run run, const Tensor& x, double c) {
  Tensor out = zeros(x.shape());
  void* args[] = {x.raw_data(), out.raw_data()};
  run(static_cast<void* const*>(args));
  return bool(bit_equal(out, smelt::tanh(mul(x, scalar_tensor(c)))));
}

std::vector<std::string> entries(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found.push_back(e.path().string());
    }
  }
  return found;
}

KernelCacheOptions options_in(const std::string& dir) {
  KernelCacheOptions o = KernelCacheOptions::from_env();
  o.dir = dir;
  o.sync_compile = false;
  return o;
}

// A stand-in compiler at `path`: answers --version with "`name` 1.0", otherwise runs `body` (sh).
void write_fake_compiler(const std::string& path, const std::string& name,
                         const std::string& body) {
  {
    std::ofstream script(path);
    script << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '" << name << " 1.0'; exit 0; fi\n"
           << body;
  }
  ::chmod(path.c_str(), 0755);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The first run is at once (interpreter); after the background compile the handle runs the
// compiled kernel; a second process-like cache finds it on disk; damaged entries are rebuilt.
TEST(KernelCache, TieredThenDiskHitThenCorruptEntriesRebuilt) {
  const std::string dir = temp_dir("tiered"), dump = temp_dir("dump");
  KernelBuilder kb = scaled_tanh(64, 1024, 1.5);
  Tensor x = randn({64, 1024});
  std::string so;
  {
    KernelCacheOptions o = options_in(dir);
    o.dump_dir = dump;
    KernelCache cache(o);
    auto handle = cache.get(kb.k);
    EXPECT_TRUE(runs_correctly([&](void* const* a) { handle->run(a); }, x, 1.5));  // whichever tier
    handle->wait();
    ASSERT_NE(handle->compiled_entry(), nullptr) << handle->error();
    EXPECT_TRUE(runs_correctly(handle->compiled_entry(), x, 1.5));
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_GT(cache.stats().compile_seconds, 0);
    auto again = cache.get(kb.k);
    EXPECT_NE(again->compiled_entry(), nullptr);
    EXPECT_EQ(cache.stats().memory_hits, 1);
    // SMELT_DUMP_DIR: the source, with the comment naming the fused ops
    std::vector<std::string> dumped = entries(dump, ".cpp");
    ASSERT_EQ(dumped.size(), 1u);
    std::ifstream in(dumped[0]);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("// fused: mul, tanh"), std::string::npos);
    // ... and the headers it includes, so that it compiles by hand with -I<dump>/include/<hash>
    std::ifstream header(dump + "/include/" + kernel_headers_hash().substr(0, 16) +
                         "/kernels/scalar.h");
    EXPECT_TRUE(header.good());
    so = dir + "/" + cache.key(kb.k) + ".so";
  }
  {
    KernelCache cache(options_in(dir));
    auto handle = cache.get(kb.k);
    ASSERT_NE(handle->compiled_entry(), nullptr);  // from disk, at once
    EXPECT_TRUE(runs_correctly(handle->compiled_entry(), x, 1.5));
    EXPECT_EQ(cache.stats().disk_hits, 1);
    EXPECT_EQ(cache.stats().misses, 0);
  }
  // Damage the entry two ways (no process has it loaded now): truncation, then a flipped byte.
  for (int damage = 0; damage < 2; ++damage) {
    const auto size = std::filesystem::file_size(so);
    if (damage == 0) {
      std::filesystem::resize_file(so, size / 2);
    } else {
      std::fstream f(so, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(size / 3));
      f.put('\x5a');
    }
    KernelCache cache(options_in(dir));
    ::testing::internal::CaptureStderr();
    auto compiled = cache.compile(kb.k);
    auto twice = cache.compile(kb.k);  // a memory hit: no second report
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(count(err, "is corrupt"), 1) << err;
    EXPECT_NE(err.find(damage == 0 ? "truncated" : "checksum mismatch"), std::string::npos) << err;
    EXPECT_EQ(cache.stats().corrupt_entries, 1);
    EXPECT_EQ(cache.stats().misses, 1);
    ASSERT_TRUE(compiled);
    EXPECT_TRUE(runs_correctly(compiled->entry, x, 1.5));
  }
}

// The kernels compile against the library's own headers: what the cache dir's include directory
// holds (here a header that stops any compile) is replaced before every compiler run, also after
// the cache wrote it once.
TEST(KernelCache, ATamperedHeaderInTheCacheIsRepairedBeforeCompiling) {
  const std::string dir = temp_dir("tampered");
  const std::filesystem::path scalar =
      dir + "/include/" + kernel_headers_hash().substr(0, 16) + "/kernels/scalar.h";
  std::filesystem::create_directories(scalar.parent_path());
  KernelCache cache(options_in(dir));
  for (double c : {0.625, 0.375}) {
    std::ofstream(scalar) << "#error tampered\n";
    KernelBuilder kb = scaled_tanh(8, 256, c);
    auto compiled = cache.compile(kb.k);
    ASSERT_TRUE(compiled);
    EXPECT_TRUE(runs_correctly(compiled->entry, randn({8, 256}), c));
  }
  // The include directory is not in the recorded flags (nor, so, in the keys): a cache moved or
  // shared between checkouts keeps its hits.
  for (const std::string& flag : cache.compiler().flags) EXPECT_NE(flag.rfind("-I", 0), 0u) << flag;
}

// Headers that cannot be written (here `include` is a file) fail the whole batch once, with the
// reason on every handle, and no compiler runs; each handle still runs on the interpreter.
TEST(KernelCache, UnwritableHeadersFailTheBatchOnce) {
  const std::string dir = temp_dir("no-headers");
  std::ofstream(dir + "/include") << "in the way";
  KernelCacheOptions o = options_in(dir);
  o.compile_threads = 1;
  std::vector<KernelBuilder> kbs;
  for (int i = 0; i < 3; ++i) kbs.push_back(scaled_tanh(4, 32, 0.25 + i));
  std::vector<const LoopKernel*> request;
  for (const KernelBuilder& kb : kbs) request.push_back(&kb.k);
  KernelCache cache(o);
  ::testing::internal::CaptureStderr();
  std::vector<std::shared_ptr<KernelHandle>> handles = cache.get_many(request);
  for (const auto& h : handles) h->wait();
  ::testing::internal::GetCapturedStderr();
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_EQ(handles[i]->compiled_entry(), nullptr);
    EXPECT_NE(handles[i]->error().find("include"), std::string::npos) << handles[i]->error();
    EXPECT_TRUE(runs_correctly([&](void* const* args) { handles[i]->run(args); }, randn({4, 32}),
                               0.25 + double(i)));
  }
  EXPECT_EQ(cache.stats().compiler_runs, 0);
  EXPECT_EQ(cache.stats().compile_failures, 1);
}

// Two processes compile the same kernel into one cache directory at the same time: both get a
// working kernel, one complete entry remains, no temporaries.
TEST(KernelCache, ConcurrentProcessesCompileTheSameKernel) {
  const std::string dir = temp_dir("fork");
  KernelBuilder kb = scaled_tanh(4, 250, -0.75);  // 1000 elements: no threads in the children
  Tensor x = randn({4, 250});
  pid_t children[2];
  for (pid_t& child : children) {
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int code = 1;
      try {
        KernelCache cache(options_in(dir));
        auto compiled = cache.compile(kb.k);
        code = compiled && runs_correctly(compiled->entry, x, -0.75) &&
                       cache.stats().corrupt_entries == 0
                   ? 0
                   : 2;
      } catch (...) {
        code = 3;
      }
      ::_exit(code);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit status " << status;
  }
  KernelCache cache(options_in(dir));
  EXPECT_EQ(entries(dir, ".so"), std::vector<std::string>{dir + "/" + cache.key(kb.k) + ".so"});
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  auto compiled = cache.compile(kb.k);
  EXPECT_EQ(cache.stats().disk_hits, 1);
  EXPECT_EQ(cache.stats().corrupt_entries, 0);
  ASSERT_TRUE(compiled);
  EXPECT_TRUE(runs_correctly(compiled->entry, x, -0.75));
  DiskCacheSummary summary = disk_cache_summary(dir);
  EXPECT_EQ(summary.entries, 1);
  EXPECT_GE(summary.compiles, 1);  // each child logged its compile
  // <key>.so, <key>.cpp, events.log, and the headers the compile wrote (include/<hash>/...)
  EXPECT_EQ(disk_cache_clear(dir), 2 + 1 + int64_t(kernel_headers().size()));
  EXPECT_EQ(disk_cache_summary(dir).entries, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/include"));
}

// SMELT_CXX=/nonexistent: everything runs on the interpreter, after exactly one warning.
TEST(KernelCache, NoCompilerFallsBackToTheInterpreterWithOneWarning) {
  ::setenv("SMELT_CXX", "/nonexistent", 1);
  KernelCacheOptions o = options_in(temp_dir("nocxx"));
  o.dump_dir = temp_dir("nocxx-dump");  // sources are still written: no compiler is needed for them
  KernelCache cache(o);
  ::unsetenv("SMELT_CXX");
  EXPECT_FALSE(cache.compiler().available());
  KernelBuilder a = scaled_tanh(8, 100, 2.0), b = scaled_tanh(8, 100, 3.0);
  ::testing::internal::CaptureStderr();
  auto ha = cache.get(a.k);
  auto hb = cache.get(b.k);
  EXPECT_EQ(cache.compile(a.k), nullptr);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "warning: no C++ compiler"), 1) << err;
  EXPECT_NE(err.find("SMELT_CXX=/nonexistent"), std::string::npos) << err;
  EXPECT_EQ(ha->compiled_entry(), nullptr);
  EXPECT_NE(ha->error().find("no C++ compiler"), std::string::npos);
  Tensor x = randn({8, 100});
  EXPECT_TRUE(runs_correctly([&](void* const* args) { ha->run(args); }, x, 2.0));
  EXPECT_TRUE(runs_correctly([&](void* const* args) { hb->run(args); }, x, 3.0));
  EXPECT_EQ(entries(o.dump_dir, ".cpp").size(), 2u);
}

// A compiler that fails: its message reaches the caller as a smelt::Error; the tiered handle
// stays on the interpreter and says why.
TEST(KernelCache, CompilerErrorsBecomeSmeltErrors) {
  const std::string dir = temp_dir("badcxx"), cxx = dir + "/fakecxx";
  write_fake_compiler(cxx, "fakecxx",
                      "echo 'kernel.cpp:1: error: this compiler refuses everything' >&2\nexit 1\n");
  KernelCacheOptions o = options_in(dir + "/cache");
  o.cxx = cxx;
  KernelCache cache(o);
  ASSERT_TRUE(cache.compiler().available()) << cache.compiler().missing;
  EXPECT_EQ(cache.compiler().version, "fakecxx 1.0");
  KernelBuilder kb = scaled_tanh(2, 3, 4.0);
  try {
    cache.compile(kb.k);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this compiler refuses everything"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("failed (exit 1)"), std::string::npos) << e.what();
  }
  ::testing::internal::CaptureStderr();
  auto handle = cache.get(kb.k);
  handle->wait();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(handle->compiled_entry(), nullptr);
  EXPECT_NE(handle->error().find("this compiler refuses everything"), std::string::npos);
  EXPECT_NE(err.find("stays on the interpreter"), std::string::npos) << err;
  Tensor x = randn({2, 3});
  EXPECT_TRUE(runs_correctly([&](void* const* args) { handle->run(args); }, x, 4.0));
  EXPECT_EQ(cache.stats().compile_failures, 2);
  EXPECT_TRUE(entries(dir + "/cache", ".so").empty());
}

// A plan's kernels requested together compile in one compiler run (one translation unit: each
// kernel's source guards what it shares), are published one entry per key, and load from disk
// one by one in another process's cache.
TEST(KernelCache, KernelsRequestedTogetherCompileInOneRun) {
  const std::string dir = temp_dir("batch");
  KernelCacheOptions o = options_in(dir);
  o.compile_threads = 1;
  std::vector<KernelBuilder> kbs;
  for (int i = 0; i < 4; ++i) kbs.push_back(scaled_tanh(3 + i, 50, 0.5 + i));
  // A reduction too: its OpenMP reduction declaration must not clash with another kernel's.
  for (int i = 0; i < 2; ++i) {
    KernelBuilder kb({6}, {40});
    int x = kb.load(kb.access(kb.arg(DType::Float64, 240, false), 0, {40}, {1}));
    int r =
        kb.reduce(ReduceOp::Sum, kb.call(ScalarFn::mul, {x, kb.constant(DType::Float64, 1.0 + i)}));
    kb.store_row(kb.result(r, kb.k.stages),
                 kb.access(kb.arg(DType::Float64, 6, true), 0, {1}, {0}));
    kbs.push_back(kb);
  }
  // Online sums of exponentials too (softmax rows): their block-maximum reduction likewise.
  for (int i = 0; i < 2; ++i) {
    KernelBuilder kb({6}, {40});
    int x = kb.load(kb.access(kb.arg(DType::Float32, 240, false), 0, {40}, {1}));
    int r = kb.reduce(ReduceOp::SumExp,
                      kb.call(ScalarFn::mul, {x, kb.constant(DType::Float32, 1.0 + i)}));
    kb.k.reductions[size_t(r)].dtype = DType::Float64;  // a SumExp accumulates in float64
    kb.store_row(kb.result(r, kb.k.stages),
                 kb.access(kb.arg(DType::Float64, 6, true), 0, {1}, {0}));
    kbs.push_back(kb);
  }
  std::vector<const LoopKernel*> request;
  for (const KernelBuilder& kb : kbs) request.push_back(&kb.k);
  request.push_back(&kbs[0].k);  // the same kernel twice: compiled once
  {
    KernelCache cache(o);
    std::vector<std::shared_ptr<KernelHandle>> handles = cache.get_many(request);
    ASSERT_EQ(handles.size(), request.size());
    for (const auto& h : handles) h->wait();
    for (size_t i = 0; i < handles.size(); ++i)
      EXPECT_NE(handles[i]->compiled_entry(), nullptr) << handles[i]->error();
    EXPECT_EQ(handles.back(), handles[0]);
    EXPECT_EQ(cache.stats().compiler_runs, 1);
    EXPECT_EQ(cache.stats().compile_failures, 0);
    EXPECT_EQ(cache.stats().misses, 8);
    for (int i = 0; i < 4; ++i) {
      Tensor x = randn({3 + i, 50});
      EXPECT_TRUE(
          runs_correctly([&](void* const* args) { handles[size_t(i)]->run(args); }, x, 0.5 + i))
          << i;
    }
  }
  EXPECT_EQ(entries(dir, ".so").size(), 8u);
  EXPECT_EQ(entries(dir, ".cpp").size(), 8u);
  EXPECT_EQ(disk_cache_summary(dir).entries, 8);
  KernelCache other(o);
  for (int i = 0; i < 4; ++i) {
    auto compiled = other.compile(kbs[size_t(i)].k);
    ASSERT_TRUE(compiled);
    Tensor x = randn({3 + i, 50});
    EXPECT_TRUE(runs_correctly(compiled->entry, x, 0.5 + i)) << i;
  }
  EXPECT_EQ(other.stats().disk_hits, 4);
  EXPECT_EQ(other.stats().misses, 0);
}

// Two processes compile the same batch into one directory at once: each publishes a whole file
// per key (the last rename wins), both get working kernels, no temporaries remain, and a third
// cache loads every key from disk intact.
TEST(KernelCache, TwoProcessesPublishTheSameBatchAtOnce) {
  const std::string dir = temp_dir("forkbatch");
  KernelCacheOptions o = options_in(dir);
  o.compile_threads = 1;
  KernelBuilder a = scaled_tanh(4, 50, 0.125), b = scaled_tanh(4, 50, 0.375),
                c = scaled_tanh(4, 50, 0.625);
  Tensor x = randn({4, 50});
  pid_t children[2];
  for (pid_t& child : children) {
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int code = 1;
      try {
        KernelCache cache(o);
        auto handles = cache.get_many({&a.k, &b.k, &c.k});
        const double cs[] = {0.125, 0.375, 0.625};
        code = 0;
        for (size_t i = 0; i < 3; ++i) {
          handles[i]->wait();
          if (!handles[i]->compiled_entry() ||
              !runs_correctly([&](void* const* args) { handles[i]->run(args); }, x, cs[i])) {
            code = 2;
          }
        }
      } catch (...) {
        code = 3;
      }
      ::_exit(code);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit status " << status;
  }
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  KernelCache cache(o);
  const double cs[] = {0.125, 0.375, 0.625};
  const KernelBuilder* kbs[] = {&a, &b, &c};
  for (size_t i = 0; i < 3; ++i) {
    auto compiled = cache.compile(kbs[i]->k);
    ASSERT_TRUE(compiled);
    EXPECT_TRUE(runs_correctly(compiled->entry, x, cs[i])) << i;
  }
  EXPECT_EQ(cache.stats().disk_hits, 3);
  EXPECT_EQ(cache.stats().corrupt_entries, 0);
}

// One kernel of a batch the compiler refuses: the batch is compiled again kernel by kernel, so
// the others compile and the error names the refused one only.
TEST(KernelCache, ARefusedKernelInABatchDoesNotHoldBackTheOthers) {
  const std::string dir = temp_dir("batchfail"), cxx = dir + "/pickycxx";
  write_fake_compiler(
      cxx, "pickycxx",
      "for last; do :; done\n"
      "if grep -q refused_kernel \"$last\"; then echo 'error: refused_kernel is refused' "
      ">&2; exit 1; fi\n"
      "exec g++ \"$@\"\n");
  KernelCacheOptions o = options_in(dir + "/cache");
  o.cxx = cxx;
  o.compile_threads = 1;
  KernelCache cache(o);
  KernelBuilder good_a = scaled_tanh(5, 20, 1.25), bad = scaled_tanh(5, 20, 2.25),
                good_b = scaled_tanh(5, 20, 3.25);
  bad.k.name = "refused_kernel";
  ::testing::internal::CaptureStderr();
  auto handles = cache.get_many({&good_a.k, &bad.k, &good_b.k});
  for (const auto& h : handles) h->wait();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(handles[0]->compiled_entry(), nullptr) << handles[0]->error();
  EXPECT_EQ(handles[1]->compiled_entry(), nullptr);
  EXPECT_NE(handles[2]->compiled_entry(), nullptr) << handles[2]->error();
  EXPECT_NE(handles[1]->error().find("refused_kernel is refused"), std::string::npos)
      << handles[1]->error();
  EXPECT_EQ(count(err, "stays on the interpreter"), 1) << err;
  EXPECT_EQ(cache.stats().compile_failures, 1);
  EXPECT_EQ(cache.stats().compiler_runs, 2);  // good_a alone, good_b alone (the batch run failed)
  Tensor x = randn({5, 20});
  EXPECT_TRUE(
      runs_correctly([&](void* const* args) { handles[1]->run(args); }, x, 2.25));  // interpreted
  EXPECT_TRUE(runs_correctly([&](void* const* args) { handles[2]->run(args); }, x, 3.25));
}

// The keys of a batch share one file: damage through one name damages all, and each key finds
// its entry broken, says so and rebuilds it.
TEST(KernelCache, ATruncatedBatchEntryIsRebuiltForEveryKey) {
  const std::string dir = temp_dir("batchtrunc");
  KernelCacheOptions o = options_in(dir);
  o.compile_threads = 1;
  KernelBuilder a = scaled_tanh(7, 30, 0.25), b = scaled_tanh(7, 30, 0.75);
  std::string key_a;
  {
    KernelCache cache(o);
    key_a = cache.key(a.k);
    for (const auto& h : cache.get_many({&a.k, &b.k})) h->wait();
    ASSERT_EQ(cache.stats().compiler_runs, 1);
  }
  const std::string so = dir + "/" + key_a + ".so";
  std::filesystem::resize_file(so, std::filesystem::file_size(so) / 2);
  KernelCache cache(o);
  ::testing::internal::CaptureStderr();
  auto ca = cache.compile(a.k);
  auto cb = cache.compile(b.k);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.stats().corrupt_entries, 2) << err;
  EXPECT_EQ(count(err, "is corrupt"), 2) << err;
  EXPECT_EQ(cache.stats().misses, 2);
  Tensor x = randn({7, 30});
  ASSERT_TRUE(ca && cb);
  EXPECT_TRUE(runs_correctly(ca->entry, x, 0.25));
  EXPECT_TRUE(runs_correctly(cb->entry, x, 0.75));
}

// memory_entries bounds the loaded kernels; an evicted kernel comes back from disk.
TEST(KernelCache, LruEvictsToDisk) {
  KernelCacheOptions o = options_in(shared_cache().options().dir);
  o.memory_entries = 1;
  KernelCache cache(o);
  KernelBuilder a = scaled_tanh(4, 250, -0.75),
                b = scaled_tanh(64, 1024, 1.5);  // other tests' kernels
  cache.compile(a.k);
  cache.compile(b.k);
  cache.compile(a.k);  // evicted by b: from disk again
  cache.compile(a.k);  // now in memory
  KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.memory_hits, 1);
  EXPECT_EQ(s.disk_hits + s.misses, 3);
  EXPECT_GE(s.disk_hits, 1);
}

}  // namespace
}  // namespace smelt::codegen::testing

namespace smelt::codegen::testing {
namespace {

// Found by a newcomer: a kernel rebuilt while the library loaded from its old entry is still open
// threw "... has no symbol smelt_kernel_..." once, because dlopen returned the loaded library for
// the same path name instead of the new file.
TEST(KernelCache, AKernelRebuiltWhileItsOldLibraryIsLoadedLoadsTheNewFile) {
  const std::string dir = temp_dir("reload");
  KernelCacheOptions o = options_in(dir);
  o.sync_compile = true;
  KernelBuilder a = scaled_tanh(5, 20, 0.125), b = scaled_tanh(5, 20, 0.375),
                c = scaled_tanh(5, 20, 0.625);
  KernelCache first(o);
  std::vector<std::shared_ptr<KernelHandle>> held =
      first.get_many({&a.k, &b.k});  // one library: a's and b's
  ASSERT_NE(held[0]->compiled_entry(), nullptr) << held[0]->error();
  ::unlink((dir + "/" + first.key(a.k) + ".so").c_str());
  KernelCache second(o);
  std::vector<std::shared_ptr<KernelHandle>> rebuilt =
      second.get_many({&a.k, &c.k});  // a's path, a new file
  Tensor x = randn({5, 20});
  for (size_t i = 0; i < rebuilt.size(); ++i) {
    ASSERT_NE(rebuilt[i]->compiled_entry(), nullptr) << rebuilt[i]->error();
  }
  EXPECT_TRUE(runs_correctly(rebuilt[0]->compiled_entry(), x, 0.125));
  EXPECT_TRUE(runs_correctly(rebuilt[1]->compiled_entry(), x, 0.625));
  EXPECT_TRUE(runs_correctly(held[1]->compiled_entry(), x, 0.375));  // the old library still works
}

// An entry that is not a regular file (a link to /dev/zero would be read without end) is rebuilt.
TEST(KernelCache, AnEntryThatIsNotARegularFileIsRebuiltNotRead) {
  // A link to /dev/zero would be read without end, a FIFO would block the open.
  for (bool fifo : {false, true}) {
    const std::string dir = temp_dir(fifo ? "fifo" : "devzero");
    KernelBuilder kb = scaled_tanh(3, 10, fifo ? 2.75 : 2.5);
    KernelCache cache(options_in(dir));
    const std::string so = dir + "/" + cache.key(kb.k) + ".so";
    std::filesystem::create_directories(dir);
    ASSERT_EQ(fifo ? ::mkfifo(so.c_str(), 0644) : ::symlink("/dev/zero", so.c_str()), 0);
    auto compiled = cache.compile(kb.k);
    ASSERT_TRUE(compiled);
    EXPECT_TRUE(runs_correctly(compiled->entry, randn({3, 10}), fifo ? 2.75 : 2.5));
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(so)));
  }
}

// A compiler that never returns is killed at the timeout, with everything it started; the
// kernel falls back to the interpreter (tiered, and SMELT_SYNC_COMPILE=1 alike) and a direct
// compile() says why.
TEST(KernelCache, ACompilerThatNeverReturnsIsKilledAtTheTimeout) {
  const std::string dir = temp_dir("hangcxx"), cxx = dir + "/hangcxx",
                    pid_file = dir + "/child.pid";
  write_fake_compiler(cxx, "hangcxx", "sleep 1000 &\necho $! > " + pid_file + "\nwait\n");
  for (bool sync : {false, true}) {
    KernelCacheOptions o = options_in(dir + "/cache");
    o.cxx = cxx;
    o.compile_timeout_seconds = 1;
    o.sync_compile = sync;
    KernelCache cache(o);
    KernelBuilder kb = scaled_tanh(2, 5, sync ? 1.25 : 1.75);
    const auto start = std::chrono::steady_clock::now();
    ::testing::internal::CaptureStderr();
    auto handle = cache.get(kb.k);
    handle->wait();
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              30.0);
    EXPECT_EQ(handle->compiled_entry(), nullptr);
    EXPECT_NE(handle->error().find("timed out after 1 s"), std::string::npos) << handle->error();
    EXPECT_NE(err.find("stays on the interpreter"), std::string::npos) << err;
    EXPECT_TRUE(runs_correctly([&](void* const* args) { handle->run(args); }, randn({2, 5}),
                               sync ? 1.25 : 1.75));
    std::ifstream in(pid_file);
    pid_t child = 0;
    ASSERT_TRUE(in >> child);
    for (int i = 0; i < 100 && ::kill(child, 0) == 0; ++i) ::usleep(20000);
    EXPECT_NE(::kill(child, 0), 0) << "the compiler's child " << child << " still runs";
  }
  // A compiler that closes its output and then hangs: the wait for it has the same deadline.
  // (Found in review: the read ended at the closed pipe, then waited without one.)
  const std::string mute = dir + "/mutecxx";
  write_fake_compiler(mute, "mutecxx", "exec >&- 2>&-\nexec sleep 1000\n");
  KernelCacheOptions mo = options_in(dir + "/mute-cache");
  mo.cxx = mute;
  mo.compile_timeout_seconds = 1;
  mo.sync_compile = true;
  {
    KernelCache cache(mo);
    KernelBuilder kb = scaled_tanh(2, 5, 2.125);
    const auto start = std::chrono::steady_clock::now();
    ::testing::internal::CaptureStderr();
    auto handle = cache.get(kb.k);
    ::testing::internal::GetCapturedStderr();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              30.0);
    EXPECT_NE(handle->error().find("timed out"), std::string::npos) << handle->error();
  }
  KernelCacheOptions o = options_in(dir + "/cache");
  o.cxx = cxx;
  o.compile_timeout_seconds = 1;
  KernelCache cache(o);
  KernelBuilder kb = scaled_tanh(2, 5, 2.25);
  try {
    cache.compile(kb.k);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace smelt::codegen::testing
