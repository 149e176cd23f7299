// `distcrown verify`: decides a VNNLIB property (the VNN-COMP contract in README.md): the result
// (sat / unsat / timeout / unknown) on stdout and in --result, with the counterexample for sat;
// progress on stderr at most once a second. On any failure main.cpp writes `error` to --result.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/problem_input.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/output_file.hpp"

namespace distcrown::cli {
namespace {

// World size announced by the MPI launcher (1 when not started by mpirun).
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 1;
}

// SIGINT and SIGTERM (what a competition harness sends at its deadline) end verify at once with
// the answer "timeout", on stdout and in --result. The handler uses async-signal-safe calls only,
// so the path waits in a fixed buffer, set before verify starts: the executable's one piece of
// process-wide state besides the memory accountant (a signal handler cannot be given any other).
std::array<char, 4096>
    g_signal_result_path{};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void answer_timeout_on_signal(int /*signal*/) {
  static constexpr char kText[] = "timeout\n";
  if (g_signal_result_path[0] != '\0') {
    const int fd =
        ::open(g_signal_result_path.data(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, kText, sizeof kText - 1);
      ::close(fd);
    }
  }
  (void)!::write(STDOUT_FILENO, kText, sizeof kText - 1);
  ::_exit(0);
}

// Installs the handler for SIGINT and SIGTERM; a result path too long for the buffer is answered
// on stdout only.
void answer_timeout_on_signals(const std::string& result) {
  if (result.size() < g_signal_result_path.size()) {
    std::copy(result.begin(), result.end(), g_signal_result_path.begin());
    g_signal_result_path[result.size()] = '\0';
  }
  struct sigaction action {};
  action.sa_handler = answer_timeout_on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The real answer is written with the two signals blocked, so a late signal cannot replace it.
void write_result(const std::string& path, const std::string& text) {
  sigset_t deadline_signals;
  sigemptyset(&deadline_signals);
  sigaddset(&deadline_signals, SIGINT);
  sigaddset(&deadline_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &deadline_signals, nullptr);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!path.empty()) write_output_file(path, text);
}

int run_verify(const RunOptions& a) {
  if (launcher_world_size() > 1) {
    throw UnsupportedError("verify runs in one process (start it without mpirun)");
  }
  require_usable_device(a.device);
  answer_timeout_on_signals(a.result);
  c10::NoGradGuard no_grad;
  // Branch and bound runs many small operations; on this class of machine OpenMP's threads
  // cost more than they give there (rounds measured 4-200x slower with 2 threads than 1).
  at::set_num_threads(a.threads);
  ProblemInput in = load_problem_input(a.model, a.vnnlib);
  bab::VerifyOptions o = a.verify;
  // --iterations and --lr are α-CROWN's, here the root's.
  o.bab.root_iterations = a.alpha.iterations;
  o.bab.root_lr = a.alpha.lr;
  o.bab.progress = !a.quiet;
  o.bound.crown_batch_size = a.bound.crown_batch_size;
  o.bound.conv_mode = a.bound.conv_mode;
  // Input splitting bounds many small boxes of a small network: CROWN on every neuron
  // (intersected with IBP) costs little there and tightens every box.
  const bool tight = a.intermediate == Intermediate::kTight ||
                     (a.intermediate == Intermediate::kAuto && o.split != bab::SplitMode::kRelu &&
                      in.problem.graph.input_numel() <= o.input_split_max_inputs);
  o.bound.scheme = tight ? IntermediateScheme::kTight : IntermediateScheme::kAutoLirpa;
  // Always: float64 ONNX models load with float64 parameters, and --dtype decides.
  in.problem.graph.to_dtype(a.dtype == Dtype::kFloat64 ? at::kDouble : at::kFloat);
  if (a.device == Device::kCuda) in.problem.graph.to_device(at::Device(at::kCUDA));
  const bab::VerifyResult r = bab::verify(in.problem.graph, in.problem.property, o);
  std::fprintf(stderr, "verify: %s in %.2f s (%s; %lld domains bounded)\n",
               bab::to_string(r.verdict).c_str(), r.seconds, r.detail.c_str(),
               static_cast<long long>(r.domains_bounded));
  write_result(a.result, bab::format_result(r));
  return 0;
}

}  // namespace

Action add_verify_command(CLI::App& app) {
  return add_command(
      app, Command::kVerify,
      "Decide a VNNLIB property: sat (with a counterexample), unsat, timeout or unknown",
      run_verify);
}

}  // namespace distcrown::cli
