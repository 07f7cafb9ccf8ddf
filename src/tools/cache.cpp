// smelt cache: the disk cache of compiled kernels ($SMELT_CACHE_DIR, default ~/.cache/smelt).
//
//   smelt cache stats   where it is, how many kernels and bytes, the compiler and flags that key
//                       it, and the compiles, disk hits and corrupt entries logged by all processes
//   smelt cache clear   removes the compiled kernels, their sources, the headers they include and
//                       the log
#include <CLI/CLI.hpp>

#include <cstdio>

#include "codegen/compiler.h"
#include "codegen/kernel_cache.h"
#include "tools/commands.h"

namespace smelt::tools {

void register_cache(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("cache", "Show or clear the disk cache of compiled kernels");
  cmd->require_subcommand(1);
  cmd->add_subcommand("stats", "Entries, bytes, compiler, logged compiles and hits")->callback([] {
    codegen::DiskCacheSummary s = codegen::disk_cache_summary(codegen::default_cache_dir());
    codegen::Compiler c = codegen::find_compiler();
    std::printf("cache dir: %s\n", s.dir.c_str());
    std::printf("entries: %lld (%.1f KiB)\n", (long long)s.entries, double(s.bytes) / 1024.0);
    if (c.available()) {
      std::string flags;
      for (const std::string& f : c.flags) flags += " " + f;
      std::printf("compiler: %s (%s)\nflags:%s\n", c.path.c_str(), c.version.c_str(), flags.c_str());
    } else {
      std::printf("compiler: none (%s): kernels run on the interpreter\n", c.missing.c_str());
    }
    std::printf("compiles: %lld, %.2f s in total\n", (long long)s.compiles, s.compile_seconds);
    if (s.compiles) std::printf("compile time per kernel: %.3f s\n", s.compile_seconds / double(s.compiles));
    std::printf("disk hits: %lld\ncorrupt entries rebuilt: %lld\n", (long long)s.disk_hits,
                (long long)s.corrupt_entries);
  });
  cmd->add_subcommand("clear", "Remove every cached kernel")->callback([] {
    const std::string dir = codegen::default_cache_dir();
    long long removed = codegen::disk_cache_clear(dir);
    std::printf("removed %lld files from %s\n", removed, dir.c_str());
  });
}

}  // namespace smelt::tools
