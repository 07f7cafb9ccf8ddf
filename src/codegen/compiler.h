// The compiler driver: finds the system C++ compiler, compiles a generated translation unit
// into a shared object and loads it with dlopen.
//
// The compiler is `$SMELT_CXX` when set (a path, or a name looked up in PATH), else `c++`, else
// `g++`. Its version (the first line of `--version`) is read once. Every kernel is compiled with
// the same recorded flags, `-O3 -march=native -ffp-contract=off -fno-builtin-pow -fno-builtin-powf
// ... -fPIC -shared -fopenmp -std=c++20` (no contraction, as smelt itself is built, and no
// rewriting of pow with a constant exponent, so the roundings are the eager ones), plus -I<dir>,
// where <dir> holds the headers embedded in libsmelt (codegen/kernel_headers.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace smelt::codegen {

struct Compiler {
  std::string path;     // absolute path of the executable; empty when none was found
  std::string version;  // first line of `path --version`
  std::vector<std::string> flags;
  std::string missing;  // when path is empty: what was looked for, for the warning

  bool available() const { return !path.empty(); }
};

// The compiler named by `cxx` (a path or a name in PATH), or when nullopt by $SMELT_CXX, else c++,
// else g++. Never throws for a missing compiler: the result is then !available().
Compiler find_compiler(const std::optional<std::string>& cxx = std::nullopt);

// Compiles `source` into the shared object `so_path`, writing the source next to it as
// `source_path`; `include_dir` (write_kernel_headers) is passed with -I. Throws smelt::Error with
// the compiler's messages when it fails, or when it runs longer than `timeout_seconds` (then the
// compiler and every process it started are killed: a hung compiler must not hang the caller).
void compile_shared_object(const Compiler& compiler, const std::string& source,
                           const std::string& source_path, const std::string& so_path,
                           const std::string& include_dir, double timeout_seconds = 300);

// A dlopen()ed shared object, closed when the last reference goes.
class SharedLibrary {
 public:
  // Throws smelt::Error with dlerror()'s reason. Loads the file at `path` now, even when a library
  // loaded earlier from the same path (a kernel since rebuilt) is still open: dlopen would return
  // that one, so each open goes through a link of its own name.
  static std::shared_ptr<SharedLibrary> open(const std::string& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // Throws smelt::Error when the library lacks `name`.
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

}  // namespace smelt::codegen
