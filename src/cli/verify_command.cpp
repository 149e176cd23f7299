// `distcrown verify`: decides a VNNLIB property (the VNN-COMP contract in README.md): the result
// (sat / unsat / timeout / unknown, or error) on stdout and in --result, with the counterexample
// for sat; progress on stderr at most once a second.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "cli/commands.hpp"
#include "cli/problem_input.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {
namespace {

struct VerifyArgs {
  std::string model;
  std::string vnnlib;
  double timeout = 300;
  std::string result;
  int64_t batch = 64;
  std::string branching = "fsb";
  std::string split = "auto";
  bool deterministic = false;
  int64_t max_rounds = 0;
  int iterations = 20;
  uint64_t seed = 0;
  bool quiet = false;
  std::string intermediate = "auto";
  std::string dtype = "float32";
  int threads = 1;
  std::string device = "cpu";
};

// World size announced by the MPI launcher (1 when not started by mpirun).
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 1;
}

void write_result(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) throw InvalidArgument("cannot write " + path);
  out << text;
  if (!out) throw InvalidArgument("error writing " + path);
}

int run_verify(const VerifyArgs& a) {
  if (launcher_world_size() > 1) {
    throw UnsupportedError("verify runs in one process (start it without mpirun)");
  }
  try {
    c10::NoGradGuard no_grad;
    // Branch and bound runs many small operations; on this class of machine OpenMP's threads
    // cost more than they give there (rounds measured 4-200x slower with 2 threads than 1).
    at::set_num_threads(a.threads);
    ProblemInput in = load_problem_input(a.model, a.vnnlib);
    bab::VerifyOptions o;
    o.timeout_s = a.timeout;
    o.bab.batch = a.batch;
    o.bab.branching = a.branching == "babsr" ? bab::Branching::kBabsr : bab::Branching::kFsb;
    o.bab.deterministic = a.deterministic;
    o.bab.max_rounds = a.max_rounds;
    o.bab.iterations = a.iterations;
    o.bab.attack.seed = a.seed;
    o.bab.progress = !a.quiet;
    // Input splitting bounds many small boxes of a small network: CROWN on every neuron
    // (intersected with IBP) costs little there and tightens every box.
    const bool tight =
        a.intermediate == "tight" || (a.intermediate == "auto" && a.split != "relu" &&
                                      in.problem.graph.input_numel() <= o.input_split_max_inputs);
    o.bound.scheme = tight ? IntermediateScheme::kTight : IntermediateScheme::kAutoLirpa;
    in.problem.graph.to_dtype(a.dtype == "float64" ? at::kDouble : at::kFloat);
    if (a.device == "cuda") {
      if (!at::hasCUDA() || at::getNumGPUs() == 0) {
        throw UnsupportedError("--device cuda: no CUDA device is usable here");
      }
      in.problem.graph.to_device(at::Device(at::kCUDA));
    }
    o.split = a.split == "input"  ? bab::SplitMode::kInput
              : a.split == "relu" ? bab::SplitMode::kRelu
                                  : bab::SplitMode::kAuto;
    const bab::VerifyResult r = bab::verify(in.problem.graph, in.problem.property, o);
    const std::string text = bab::format_result(r);
    std::fputs(text.c_str(), stdout);
    std::fprintf(stderr, "verify: %s in %.2f s (%s; %lld domains bounded)\n",
                 bab::to_string(r.verdict).c_str(), r.seconds, r.detail.c_str(),
                 static_cast<long long>(r.domains_bounded));
    write_result(a.result, text);
    return 0;
  } catch (...) {
    // The contract: a result file exists whenever one was asked for.
    try {
      write_result(a.result, "error\n");
    } catch (...) {  // NOLINT(bugprone-empty-catch): the original error is the one to report
    }
    throw;
  }
}

}  // namespace

Action add_verify_command(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Decide a VNNLIB property: sat (with a counterexample), unsat, timeout or unknown");
  add_problem_options(*cmd, args->model, args->vnnlib);
  cmd->add_option("--timeout", args->timeout, "seconds (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--result", args->result, "write the VNN-COMP result here");
  cmd->add_option("--batch", args->batch, "domains split per branch-and-bound round")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--branching", args->branching, "ReLU branching heuristic: babsr or fsb")
      ->check(CLI::IsMember({"babsr", "fsb"}))
      ->capture_default_str();
  cmd->add_option("--split", args->split,
                  "auto (input splitting for <= 16 inputs, else ReLU splitting), input or relu")
      ->check(CLI::IsMember({"auto", "input", "relu"}))
      ->capture_default_str();
  cmd->add_flag("--deterministic", args->deterministic,
                "fixed batches, no early exits: the same work on every run");
  cmd->add_option("--max-rounds", args->max_rounds, "stop branch and bound after N rounds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--iterations", args->iterations, "alpha/beta steps per round")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "attack seed")->capture_default_str();
  cmd->add_option("--intermediate", args->intermediate,
                  "intermediate bounds: auto (tight with input splitting, else auto_lirpa), "
                  "auto_lirpa or tight")
      ->check(CLI::IsMember({"auto", "auto_lirpa", "tight"}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "float32 or float64 (bounds and forward passes)")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "intra-op (OpenMP) threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--device", args->device, "cpu or cuda (bounds, attacks and checks)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  return [args] { return run_verify(*args); };
}

}  // namespace distcrown::cli
