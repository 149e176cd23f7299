// The distcrown executable: thin over the library. Every error — a usage error from CLI11, a
// --config file, or the library — is one line "distcrown: error: ..." on stderr (followed by one
// line per node when a model has several unsupported nodes) and exit code 1
// (--help prints the help and exits 0). `verify --result F` writes `error` to F on any failure,
// even when the options could not be parsed.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/output_file.hpp"

namespace {

// Under mpirun every rank parses the same arguments; only rank 0 reports a usage error.
bool printing_process() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v) == 0;
  }
  return true;
}

void report(const std::string& message) {
  std::string text = message;
  // Some messages (CLI11's, LibTorch's) span lines; the contract is one line per error, and for a
  // model with several unsupported nodes one more line per node (distcrown::kUnsupportedListItem).
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::string item = distcrown::kUnsupportedListItem;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && text.compare(i + 1, item.size(), item) != 0) text[i] = ' ';
  }
  std::cerr << "distcrown: error: " << text << "\n";
}

// The VNN-COMP contract: a result file exists whenever verify was asked for one.
void write_error_result(const std::vector<std::string>& args) {
  if (distcrown::cli::scan_command(args) != distcrown::cli::Command::kVerify) return;
  const std::string path = distcrown::cli::scan_result(args);
  if (path.empty()) return;
  try {
    distcrown::write_output_file(path, "error\n");
  } catch (const distcrown::Error& e) {
    report(e.what());  // after the error that caused it
  }
}

}  // namespace

int main(int argc, char** argv) {
  distcrown::memory::install_counting_allocator();
  distcrown::memory::keep_freed_heap();  // fewer page faults; see memory.hpp
  CLI::App app{"distcrown: neural-network verification by bound propagation"};
  app.require_subcommand(1);
  distcrown::cli::Action bounds = distcrown::cli::add_bounds_command(app);
  distcrown::cli::Action verify = distcrown::cli::add_verify_command(app);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    args = distcrown::cli::expand_config(args);
    // CLI11 wants them last first.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.name(argc > 0 ? argv[0] : "distcrown");
    app.parse(reversed);
    if (app.got_subcommand("bounds")) return bounds();
    if (app.got_subcommand("verify")) return verify();
    throw distcrown::InvalidArgument("no command (bounds or verify)");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (printing_process()) report(e.what());
  } catch (const distcrown::cli::UsageError& e) {
    if (printing_process()) report(e.what());
  } catch (const distcrown::collective::CollectiveTimeout& e) {
    // Its collective is still pending, and the other ranks may wait in it: end them all.
    report(e.what());
    write_error_result(args);
    distcrown::collective::abort_all_ranks(1);
  } catch (const distcrown::collective::WorldError& e) {
    // Every rank has this error; rank 0 (the only one that prints) reports it once.
    if (e.printing_rank()) report(e.what());
  } catch (const distcrown::Error& e) {
    report(e.what());
  } catch (const c10::Error& e) {
    report(e.what_without_backtrace());
  } catch (const std::exception& e) {
    report(e.what());
  }
  write_error_result(args);
  return 1;
}
