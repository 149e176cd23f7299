#pragma once
// Runs a shell command with stdout and stderr captured in files of a directory (tests of the
// distcrown executable, alone or under mpirun).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "onnx_builder.hpp"

namespace distcrown::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

/// A shell command's prefix that lets Open MPI run as root (these machines' tests run as root);
/// `env` so that it may precede any command.
inline constexpr const char* kMpiAsRoot =
    "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

inline ProcessResult run_captured(const std::string& command, const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "stdout.txt";
  const std::filesystem::path err = dir / "stderr.txt";
  const std::string cmd =
      command + " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string());
  const int status = std::system(cmd.c_str());
  ProcessResult r;
  if (status != -1 && WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (status != -1 && WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

/// A job run in the background with a fault injected: the shell's view of it.
struct FaultedJob {
  bool ran = false;  // the job's exit status and the seconds below were read
  int exit_code = 0;
  int waited_s = 0;  // from the fault to the job's end
  ProcessResult run;
};

/// Starts the shell command `job` in the background, runs the shell command `fault` after
/// `delay_s` seconds, and waits for the job (all of it killed after 120 s).
inline FaultedJob run_with_fault(const std::string& job, int delay_s, const std::string& fault,
                                 const std::filesystem::path& dir) {
  const std::string script = job + " & job=$!; sleep " + std::to_string(delay_s) + "; " + fault +
                             "; start=$(date +%s); wait $job; rc=$?; echo \"rc=$rc waited=$(( "
                             "$(date +%s) - start ))\"";
  FaultedJob f;
  f.run = run_captured("timeout 120 bash -c " + shell_quote(script), dir);
  const auto at = f.run.out.find("rc=");
  f.ran = at != std::string::npos &&
          std::sscanf(f.run.out.c_str() + at, "rc=%d waited=%d", &f.exit_code, &f.waited_s) == 2;
  return f;
}

}  // namespace distcrown::testing
