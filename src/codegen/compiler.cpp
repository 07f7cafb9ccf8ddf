#include "codegen/compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "base/env.h"
#include "kernels/scalar.h"
#include "smelt/error.h"

extern char** environ;

namespace smelt::codegen {
namespace {

bool is_executable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `name` as an absolute executable path: itself when it has a '/', else looked up in PATH.
std::string resolve(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty() && is_executable(dir + "/" + name)) return dir + "/" + name;
    start = end + 1;
  }
  return "";
}

struct RunResult {
  int status = -1;     // exit code, or -1 when it did not exit normally
  std::string output;  // stdout and stderr together
  bool timed_out = false;
};

// Runs argv[0] (a path) with `argv`, no shell, collecting its output through a pipe. Past
// `timeout_seconds` the program and everything it started (its own process group: a compiler
// driver's cc1plus and as) are killed.
RunResult run_program(const std::vector<std::string>& argv, double timeout_seconds = 60) {
  int fds[2];
  SMELT_CHECK(::pipe(fds) == 0) << "codegen: pipe() failed: " << std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid;
  int err = posix_spawn(&pid, argv[0].c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(fds[1]);
  RunResult result;
  if (err != 0) {
    ::close(fds[0]);
    result.output = std::string("cannot start ") + argv[0] + ": " + std::strerror(err);
    return result;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  char buf[4096];
  for (;;) {
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = left > 0 ? ::poll(&readable, 1, int(std::min(left * 1000.0 + 1.0, 1e9))) : 0;
    if (ready == 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0)
      result.output.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  // The output ended, but the program may not have (a compiler that closed its stdout and
  // hangs): wait for it until the same deadline, then kill its group too. (Found in review.)
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (done == 0 && std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
    } else if (done == 0) {
      ::usleep(2000);
    }
  }
  result.status = WIFEXITED(status) && !result.timed_out ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

Compiler find_compiler(const std::optional<std::string>& cxx) {
  Compiler c;
  std::vector<std::string> candidates;
  std::optional<std::string> requested = cxx ? cxx : env_text("SMELT_CXX");
  if (requested)
    candidates.push_back(*requested);
  else
    candidates = {"c++", "g++"};
  for (const std::string& name : candidates) {
    c.path = resolve(name);
    if (!c.path.empty()) break;
  }
  if (c.path.empty()) {
    c.missing = requested ? "SMELT_CXX=" + *requested + " is not an executable"
                          : "neither c++ nor g++ is in PATH";
    return c;
  }
  RunResult version = run_program({c.path, "--version"});
  if (version.status != 0) {
    c.missing = c.path + " --version failed: " + version.output.substr(0, 200);
    c.path.clear();
    return c;
  }
  c.version = version.output.substr(0, version.output.find('\n'));
  // -ffp-contract=off as smelt itself is built (see CMakeLists.txt): the same roundings as eager.
  // -fno-builtin-pow(f): a generated kernel inlines its constants, and the compiler rewrites
  // pow(x, -1.0) as 1.0 / x and pow(x, 2.0) as x * x, which round differently from libm's pow
  // that the eager kernels call with the exponent in memory (fuzz --compile seed 275: the last
  // bit of pow(x, -1) in float64).
  // -fno-builtin-<libm function>, the whole class of that bug: a value the compiler can prove
  // constant (where(x == -1, x, -1) is -1) reaches erfc, exp, sin, ... and is folded at compile
  // time with correct rounding (MPFR), where the eager kernels call glibc at run time, which may be
  // an ulp off (fuzz --compile seed 12001499: gelu(-1) in float64, erfc). Not folding keeps the
  // call. -fno-tree-slp-vectorize: GCC 12's basic-block vectorizer drops a float64 -> float32 ->
  // float64 round trip (pack-truncate then unpack becomes nothing), so the value keeps bits float32
  // cannot hold. It hits the straight-line code a constant extent unrolls into: the tail after the
  // vectorized loop, or a whole inner loop of 6 (fuzz --compile seed 20025699: cast(f32) then
  // cast(f64) over an inner extent of 6, the last bit of the result). Loops are still vectorized.
  // -fno-code-hoisting: GCC 12 with AVX-512 computes a wrong select in a vectorized loop whose
  // branches code hoisting has merged: softplus(x) - sigmoid(minimum(x, 0.25)) gave sigmoid of a
  // lane holding 0.25 where x = -1.5 (0.4378 for 0.1802; fuzz --compile seed 20299646; right at
  // -O1, with clang, without AVX-512, and with hoisting off, which keeps every loop vectorized).
  // Test CodegenBackends.SoftplusMinusSigmoidOfAClampKeepsEachLane.
  // -fno-math-errno, as smelt itself is built: sqrt may set errno, and that branch kept every loop
  // with a sqrt (rsqrt, layer norm's statistics, Adam's denominator) scalar ("control flow in
  // loop"); vsqrtps rounds as sqrtf does.
  c.flags = {"-O3",
             "-march=native",
             "-ffp-contract=off",
             "-fno-math-errno",
             "-fno-tree-slp-vectorize",
             "-fno-code-hoisting",
             "-fPIC",
             "-shared",
             "-fopenmp",
             "-std=c++20"};
  for (const char* fn : scalar::libm::kLibmFunctions) {
    c.flags.push_back(std::string("-fno-builtin-") + fn);
    c.flags.push_back(std::string("-fno-builtin-") + fn + "f");
  }
  return c;
}

void compile_shared_object(const Compiler& compiler, const std::string& source,
                           const std::string& source_path, const std::string& so_path,
                           const std::string& include_dir, double timeout_seconds) {
  SMELT_INTERNAL_CHECK(compiler.available()) << "compile_shared_object without a compiler";
  {
    std::ofstream out(source_path, std::ios::binary | std::ios::trunc);
    out << source;
    out.close();
    SMELT_CHECK(out) << "codegen: cannot write kernel source " << source_path << ": "
                     << std::strerror(errno);
  }
  std::vector<std::string> argv = {compiler.path};
  argv.insert(argv.end(), compiler.flags.begin(), compiler.flags.end());
  argv.insert(argv.end(), {"-I" + include_dir, "-o", so_path, source_path});
  RunResult r = run_program(argv, timeout_seconds);
  if (r.status != 0) {
    std::string command;
    for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
    SMELT_CHECK(!r.timed_out) << "codegen: compiling " << source_path << " timed out after "
                              << timeout_seconds
                              << " s (SMELT_COMPILE_TIMEOUT); the compiler was killed\ncommand: "
                              << command;
    constexpr size_t kMaxMessage = 8000;
    if (r.output.size() > kMaxMessage) r.output = r.output.substr(0, kMaxMessage) + "\n[...]";
    SMELT_CHECK(false) << "codegen: compiling " << source_path << " failed (exit " << r.status
                       << ")\n"
                       << "command: " << command << "\n"
                       << r.output;
  }
}

std::shared_ptr<SharedLibrary> SharedLibrary::open(const std::string& path) {
  static std::atomic<uint64_t> opens{0};
  const std::string own_name =
      path + ".load." + std::to_string(::getpid()) + "." + std::to_string(opens++);
  // A hard link, else (a file system without them) a symbolic one: either is a new name.
  const bool linked = ::link(path.c_str(), own_name.c_str()) == 0 ||
                      (path[0] == '/' && ::symlink(path.c_str(), own_name.c_str()) == 0);
  void* handle = ::dlopen((linked ? own_name : path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (linked) ::unlink(own_name.c_str());  // the mapping stays; the name was only for dlopen
  if (!handle) {
    const char* why = ::dlerror();
    SMELT_CHECK(false) << "codegen: cannot load " << path << ": " << (why ? why : "unknown reason");
  }
  return std::shared_ptr<SharedLibrary>(new SharedLibrary(handle, path));
}

SharedLibrary::~SharedLibrary() { ::dlclose(handle_); }

void* SharedLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* sym = ::dlsym(handle_, name.c_str());
  SMELT_CHECK(sym) << "codegen: " << path_ << " has no symbol " << name;
  return sym;
}

}  // namespace smelt::codegen
