// Peak memory of β-CROWN branch and bound by batch size, with its breakdown: α, β and
// intermediate bounds held by the queued domains (at the round where they peaked), weights, and the
// rest of the peak (A matrices, autograd buffers, batch temporaries). Deterministic mode, a fixed
// number of rounds, one disjunct of the property that α-CROWN does not prove at the root.
//
//   build/bin/bench_bab_memory --rounds 10 --batch 128,256,512
// (default model and property: mnist_256x6 and mnist_prop_2_0.05 from ../shared/fixtures)
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <CLI/CLI.hpp>

#include "bab/relu_bab.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/util/memory.hpp"

using namespace distcrown;

namespace {
double mb(int64_t b) { return double(b) / 1e6; }
}  // namespace

int main(int argc, char** argv) {
  memory::install_counting_allocator();
  memory::keep_freed_heap();  // fewer page faults; see memory.hpp
  CLI::App app{"bench_bab_memory: peak memory of beta-CROWN branch and bound by batch size"};
  std::string model = DISTCROWN_DEFAULT_FIXTURES "/models/mnist_256x6.onnx";
  std::string vnnlib = DISTCROWN_DEFAULT_FIXTURES "/specs/mnist_prop_2_0.05.vnnlib";
  int64_t rounds = 10;
  std::vector<int64_t> batches{128, 256, 512};
  int threads = 1;
  std::string branching = "fsb";
  int iterations = 20;
  app.add_option("--model", model)->check(CLI::ExistingFile);
  app.add_option("--vnnlib", vnnlib)->check(CLI::ExistingFile);
  app.add_option("--rounds", rounds)->check(CLI::PositiveNumber);
  app.add_option("--batch", batches)->delimiter(',');
  app.add_option("--threads", threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--branching", branching)->check(CLI::IsMember({"babsr", "fsb"}));
  app.add_option("--iterations", iterations, "alpha/beta steps per round")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads);
  c10::NoGradGuard no_grad;

  io::Problem p = io::load_problem(model, vnnlib);
  const io::VnnlibCase& c = p.property.cases.front();
  std::vector<bab::Objective> objs;
  for (const auto& d : c.disjuncts) {
    objs.push_back(bab::make_objective(d, p.graph.output_numel(), p.graph.dtype()));
  }
  const int64_t weights = p.graph.param_bytes();
  std::printf(
      "model %s, property %s, %lld rounds, deterministic, %s, %d alpha/beta steps, "
      "1 disjunct, %d thread(s)\n",
      model.c_str(), vnnlib.c_str(), static_cast<long long>(rounds), branching.c_str(), iterations,
      threads);
  std::printf("%6s %9s %9s %9s %9s %9s %9s %9s %7s %8s %s\n", "batch", "peak MB", "weights",
              "alpha", "beta", "bounds", "splits", "A+temp", "rounds", "time s", "status");
  for (const int64_t batch : batches) {
    bab::BabOptions o;
    o.batch = batch;
    o.deterministic = true;
    o.max_rounds = rounds;
    o.attack_every = 0;
    o.branching = branching == "babsr" ? bab::Branching::kBabsr : bab::Branching::kFsb;
    o.iterations = iterations;
    o.measure_store = true;
    for (size_t d = 0; d < objs.size(); ++d) {
      const int64_t baseline = memory::live_bytes();
      memory::reset_peak();
      const auto t0 = std::chrono::steady_clock::now();
      const bab::BabResult r = bab::relu_bab(o, bab::RunContext{}, p.graph, {c, objs[d], objs});
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r.status == bab::BabStatus::kProved && r.rounds == 0) continue;  // root proved it
      const int64_t peak = memory::peak_bytes();
      const auto& s = r.peak_store;
      const int64_t rest = peak - baseline - s.total();
      const char* status = r.status == bab::BabStatus::kProved      ? "proved"
                           : r.status == bab::BabStatus::kFalsified ? "falsified"
                                                                    : "open";
      std::printf("%6lld %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7lld %8.1f %s (disjunct %zu)\n",
                  static_cast<long long>(batch), mb(peak), mb(weights), mb(s.alpha), mb(s.beta),
                  mb(s.bounds), mb(s.other), mb(rest), static_cast<long long>(r.rounds), secs,
                  status, d);
      std::fflush(stdout);
      break;
    }
  }
  return 0;
}
