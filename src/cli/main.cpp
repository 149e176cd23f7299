// The distcrown executable: thin over the library. Every library error becomes one line on stderr
// and exit code 1; usage errors exit 2.
#include <iostream>

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

int main(int argc, char** argv) {
  distcrown::memory::install_counting_allocator();
  CLI::App app{"distcrown: neural-network verification by bound propagation"};
  app.require_subcommand(1);
  distcrown::cli::Action bounds = distcrown::cli::add_bounds_command(app);
  distcrown::cli::Action verify = distcrown::cli::add_verify_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, or the usage error
    return rc == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("bounds")) return bounds();
    if (app.got_subcommand("verify")) return verify();
    return 2;
  } catch (const distcrown::collective::WorldError& e) {
    // Every rank has this error; rank 0 (the only one that prints) reports it once.
    if (e.printing_rank()) std::cerr << "distcrown: error: " << e.what() << "\n";
  } catch (const distcrown::Error& e) {
    std::cerr << "distcrown: error: " << e.what() << "\n";
  } catch (const c10::Error& e) {
    std::cerr << "distcrown: error: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "distcrown: error: " << e.what() << "\n";
  }
  return 1;
}
