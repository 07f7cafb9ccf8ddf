// build/smelt: the command-line program. Each subcommand lives in its own file; errors from smelt
// become one clear line on stderr and exit code 1.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "smelt/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"smelt: a deep-learning engine close to the metal"};
  app.require_subcommand(1);
  smelt::tools::register_info(app);
  smelt::tools::register_demo(app);
  smelt::tools::register_fuzz(app);
  smelt::tools::register_opt(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const smelt::Error& e) {
    std::fprintf(stderr, "smelt: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "smelt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
