// smelt info: what this build of smelt is and what it runs on.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>

#include "tools/commands.h"

namespace smelt::tools {

void register_info(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("info", "Print build and machine facts");
  cmd->callback([] {
    std::printf("smelt 0.1.0\n");
    std::printf("compiler: g++ %s\n", __VERSION__);
#if defined(__AVX512F__)
    std::printf("vector ISA: AVX-512\n");
#elif defined(__AVX2__)
    std::printf("vector ISA: AVX2\n");
#else
    std::printf("vector ISA: portable\n");
#endif
    std::printf("threads: %d (OMP_NUM_THREADS)\n", omp_get_max_threads());
  });
}

}  // namespace smelt::tools
