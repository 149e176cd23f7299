// `distcrown verify`: decides a VNNLIB property (the VNN-COMP contract in README.md): the result
// (sat / unsat / timeout / unknown) on stdout and in --result, with the counterexample for sat;
// progress on stderr at most once a second. On any failure main.cpp writes `error` to --result.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/problem_input.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {
namespace {

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

int run_verify(const RunOptions& a) {
  if (launcher_world_size() > 1) {
    throw UnsupportedError("verify runs in one process (start it without mpirun)");
  }
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
  // Input splitting bounds many small boxes of a small network: CROWN on every neuron
  // (intersected with IBP) costs little there and tightens every box.
  const bool tight = a.intermediate == Intermediate::kTight ||
                     (a.intermediate == Intermediate::kAuto && o.split != bab::SplitMode::kRelu &&
                      in.problem.graph.input_numel() <= o.input_split_max_inputs);
  o.bound.scheme = tight ? IntermediateScheme::kTight : IntermediateScheme::kAutoLirpa;
  // Always: float64 ONNX models load with float64 parameters, and --dtype decides.
  in.problem.graph.to_dtype(a.dtype == Dtype::kFloat64 ? at::kDouble : at::kFloat);
  if (a.device == Device::kCuda) {
    if (!at::hasCUDA() || at::getNumGPUs() == 0) {
      throw UnsupportedError("--device cuda: no CUDA device is usable here");
    }
    in.problem.graph.to_device(at::Device(at::kCUDA));
  }
  const bab::VerifyResult r = bab::verify(in.problem.graph, in.problem.property, o);
  const std::string text = bab::format_result(r);
  std::fputs(text.c_str(), stdout);
  std::fprintf(stderr, "verify: %s in %.2f s (%s; %lld domains bounded)\n",
               bab::to_string(r.verdict).c_str(), r.seconds, r.detail.c_str(),
               static_cast<long long>(r.domains_bounded));
  write_result(a.result, text);
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
