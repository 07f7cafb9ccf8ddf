// build/smelt: the command-line program. Each subcommand lives in its own file; errors from smelt
// become one clear line on stderr and exit code 1; command-line mistakes one line and CLI11's
// exit code (105 for a value out of range).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "base/buffer.h"
#include "fusion/fuse.h"
#include "codegen/kernel_cache.h"
#include "passes/fold.h"
#include "passes/pass_manager.h"
#include "smelt/error.h"
#include "tools/commands.h"

namespace {

// SMELT_* variables with a bad value fail before any command starts, not minutes into one.
// (SMELT_GEMM is checked at the first matrix product.)
void check_environment() {
  smelt::buffer_cache_limit();
  smelt::passes::options_from_env();
  smelt::passes::fold_options_from_env();
  smelt::fusion::fusion_options_from_env();
  smelt::codegen::KernelCacheOptions::from_env();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"smelt: a deep-learning engine close to the metal"};
  app.require_subcommand(1);
  smelt::tools::register_info(app);
  smelt::tools::register_demo(app);
  smelt::tools::register_demo_lm(app);
  smelt::tools::register_fuzz(app);
  smelt::tools::register_opt(app);
  smelt::tools::register_cache(app);
  smelt::tools::register_compile(app);
  smelt::tools::register_run(app);
  smelt::tools::register_check(app);
  smelt::tools::register_export(app);
  smelt::tools::register_export_c(app);
  smelt::tools::register_bench(app);
  smelt::tools::register_tune(app);
  smelt::tools::register_quantize(app);

  try {
    check_environment();
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    // A command that ran and failed (fuzz cases that failed): its output said what; one line more.
    std::fflush(stdout);
    std::fprintf(stderr, "smelt: %s\n", e.what());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // --help and --version print their text; a mistake on the command line is one line.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::fprintf(stderr, "smelt: error: %s (--help lists the options)\n", e.what());
    return e.get_exit_code();
  } catch (const smelt::Error& e) {
    std::fflush(stdout);  // what the command printed comes first
    std::fprintf(stderr, "smelt: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "smelt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
