// bench_attack: what one branch-and-bound round's attack costs a domain group at G groups
// (round_attack: ceil(16/G) random starts, ceil(64/G) of its worst domains' points, 30 PGD
// steps, each start against the disjunct closest to holding there), for bench_bab_scaling.py's
// model of a round: G groups share the attack's points out, but each pays its per-step cost, so
// its time does not fall as 1/G.
//
//   build/bin/bench_attack --model M.onnx --vnnlib P.vnnlib [--groups 1,2,4,...] [--repeat 7]
//                          [--json OUT]
//
// One thread. The worst domains' points are drawn uniformly in the property's box (a point's
// cost does not depend on where it is); no counterexample may be found (an unsat or open
// property), else the attack ends early and the run fails. Prints groups, points and the median
// milliseconds of the attack over --repeat runs (after one warm-up).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/error.hpp"

namespace {

using namespace distcrown;

struct Row {
  int groups = 1;
  int64_t points = 0;
  double median_s = 0;
};

// The median seconds of `repeat` attacks at `groups` groups (group 0's share), after a warm-up.
Row time_attack(const BoundGraph& g, const io::VnnlibCase& c,
                const std::vector<bab::Objective>& disjuncts, int groups, int repeat) {
  const InputBox box = io::enclosing_box(c, g, g.dtype());
  const int64_t worst = bab::round_attack_starts(groups);
  std::vector<int64_t> shape(box.lower.sizes().begin(), box.lower.sizes().end());
  shape[0] = worst;
  at::manual_seed(0);
  const at::Tensor starts =
      box.lower + at::rand(shape, box.lower.options()) * (box.upper - box.lower);  // [worst, *in]
  const bab::AttackOptions options = bab::round_attack(bab::AttackOptions{}, 5, 0, groups);
  std::vector<double> seconds;
  for (int r = 0; r <= repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (bab::pgd_attack(options, Checkpoint{}, g, c, disjuncts, starts)) {
      throw Error("bench_attack: the attack found a counterexample; use an unsat property");
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + long(seconds.size() / 2), seconds.end());
  return {groups, worst + options.restarts, seconds[seconds.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_attack: one round's attack per domain group at G groups"};
  std::string model;
  std::string vnnlib;
  std::string json_out;
  std::vector<int> groups{1, 2, 4, 8, 16, 32, 64};
  int repeat = 7;
  app.add_option("--model", model, "ONNX model")->required();
  app.add_option("--vnnlib", vnnlib, "VNNLIB property (unsat or open)")->required();
  app.add_option("--groups", groups, "domain group counts")->delimiter(',');
  app.add_option("--repeat", repeat, "timed runs of each (the median is printed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", json_out, "also write the rows here");
  CLI11_PARSE(app, argc, argv);
  try {
    at::set_num_threads(1);
    const BoundGraph g = io::load_onnx(model);
    const io::VnnlibProperty property = io::parse_vnnlib_file(vnnlib);
    const io::VnnlibCase& c = property.cases.front();
    std::vector<bab::Objective> disjuncts;
    for (const auto& d : c.disjuncts) {
      disjuncts.push_back(bab::make_objective(d, g.output_numel(), g.dtype()));
    }
    std::printf("%6s %7s %10s\n", "groups", "points", "median_ms");
    nlohmann::json rows = nlohmann::json::array();
    for (const int G : groups) {
      const Row row = time_attack(g, c, disjuncts, G, repeat);
      std::printf("%6d %7lld %10.2f\n", row.groups, static_cast<long long>(row.points),
                  row.median_s * 1e3);
      rows.push_back({{"groups", row.groups}, {"points", row.points}, {"median_s", row.median_s}});
    }
    if (!json_out.empty()) std::ofstream(json_out) << rows.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attack: %s\n", e.what());
    return 1;
  }
  return 0;
}
