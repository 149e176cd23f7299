#pragma once
// Runs a shell command with stdout and stderr captured in files of a directory (tests of the
// distcrown executable, alone or under mpirun).
#include <sys/wait.h>

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

}  // namespace distcrown::testing
