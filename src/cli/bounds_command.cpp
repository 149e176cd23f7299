// `distcrown bounds`: bounds of the network's outputs (C = identity) over the property's first
// input box, as a table on stdout and optionally JSON in --result (the contract in README.md).
// Under mpirun every rank runs this; rank 0 prints and writes, with every rank's memory in the
// report.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/embedded_default.hpp"
#include "cli/options.hpp"
#include "cli/problem_input.hpp"
#include "cli/run_setup.hpp"
#include "cli/world.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/output_file.hpp"
#include "util/tensor_values.hpp"

namespace distcrown::cli {
namespace {

// Floats written exactly: %.9g round-trips float32, %.17g float64.
std::string exact(double v, bool is_double) {
  char buf[40];
  std::snprintf(buf, sizeof buf, is_double ? "%.17g" : "%.9g", v);
  return buf;
}

struct RankReport {
  int64_t baseline = 0;
  int64_t peak = 0;
  collective::CommStats comm;
  int64_t alpha = 0;        // bytes of α this rank held (alpha-crown)
  int starts_left_out = 0;  // starts bounded without α under --memory-limit
  int memory_limited = 0;   // 1: α-CROWN stopped optimising at --memory-limit
};

std::vector<RankReport> gather_reports(collective::Communicator& comm, const RankReport& mine) {
  std::ostringstream s;
  s << mine.baseline << ' ' << mine.peak << ' ' << mine.comm.calls << ' ' << mine.comm.bytes << ' '
    << exact(mine.comm.time_s, true) << ' ' << mine.alpha << ' ' << mine.starts_left_out << ' '
    << mine.memory_limited;
  std::vector<RankReport> all;
  for (const std::string& text : comm.all_gather_strings(s.str())) {
    std::istringstream in(text);
    RankReport r;
    in >> r.baseline >> r.peak >> r.comm.calls >> r.comm.bytes >> r.comm.time_s >> r.alpha >>
        r.starts_left_out >> r.memory_limited;
    all.push_back(r);
  }
  return all;
}

void print_table(const RunOptions& a, const std::vector<double>& lower,
                 const std::vector<double>& upper, bool dbl) {
  std::printf("%s bounds of %zu outputs (%s)\n", to_string(a.method).c_str(), lower.size(),
              a.model.empty() ? kEmbeddedModelName : a.model.c_str());
  std::printf("%6s %16s %16s\n", "output", "lower", "upper");
  for (size_t i = 0; i < lower.size(); ++i) {
    std::printf("%6s %16s %16s\n", ("Y_" + std::to_string(i)).c_str(), exact(lower[i], dbl).c_str(),
                exact(upper[i], dbl).c_str());
  }
}

void write_json(const RunOptions& a, const std::vector<double>& lower,
                const std::vector<double>& upper, double seconds, int world,
                const std::vector<RankReport>& reports) {
  // Numbers go through the json library as doubles; float32 values are exact in a double and
  // nlohmann writes the shortest representation that round-trips.
  nlohmann::json j;
  j["method"] = to_string(a.method);
  j["lower"] = lower;
  j["upper"] = upper;
  j["time_s"] = seconds;
  j["dtype"] = std::string(enum_name(a.dtype));
  j["world_size"] = world;
  j["shard"] = std::string(enum_name(a.shard));
  j["spec_parallel"] = a.spec_parallel;
  int64_t max_base = 0;
  int64_t max_peak = 0;
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < reports.size(); ++r) {
    max_base = std::max(max_base, reports[r].baseline);
    max_peak = std::max(max_peak, reports[r].peak);
    ranks.push_back({{"rank", r},
                     {"baseline_bytes", reports[r].baseline},
                     {"peak_bytes", reports[r].peak},
                     {"comm",
                      {{"calls", reports[r].comm.calls},
                       {"bytes", reports[r].comm.bytes},
                       {"time_s", reports[r].comm.time_s}}}});
    if (a.method == Method::kAlphaCrown) {
      ranks.back()["alpha_bytes"] = reports[r].alpha;
      ranks.back()["starts_left_out"] = reports[r].starts_left_out;
      ranks.back()["memory_limited"] = reports[r].memory_limited != 0;
    }
  }
  j["memory"] = {{"baseline_bytes", max_base}, {"peak_bytes", max_peak}, {"ranks", ranks}};
  const collective::CommStats& c0 = reports.front().comm;
  j["comm"] = {{"calls", c0.calls}, {"bytes", c0.bytes}, {"time_s", c0.time_s}};
  write_output_file(a.result, j.dump(2) + "\n");
}

// --timeout for bounds: checked between phases (load, shard, bound), inside run_agreed so that
// every rank stops at the same phase.
void check_deadline(const bab::Deadline& deadline, const char* phase) {
  if (deadline.expired()) {
    throw Error("timeout: " + exact(deadline.seconds(), true) + " s exceeded " + phase);
  }
}

int run_bounds(const RunOptions& a) {
  const bab::Deadline deadline(a.verify.timeout_s);
  require_usable_device(a.device);
  c10::NoGradGuard no_grad;
  at::set_num_threads(a.threads);
  const collective::CommPtr comm = make_world(
      std::string(enum_name(a.backend)), std::string(enum_name(a.device)), a.collective_timeout_s);
  const at::ScalarType dtype = a.dtype == Dtype::kFloat64 ? at::kDouble : at::kFloat;
  const at::Device device =
      a.device == Device::kCuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  BoundOptions options = a.bound;
  // auto is auto_LiRPA's scheme for bounds (verify picks tight for input splitting).
  options.scheme = scheme_of(a.intermediate, IntermediateScheme::kAutoLirpa);
  const Method method = a.method;
  const sharding::ShardPlan plan = a.shard;
  // Tensor parallelism (sharding/partitioner.hpp): `tp` keeps IBP bounds inside sharded zones.
  if (plan == sharding::ShardPlan::kTp) options.sharded_intermediate = ShardedIntermediate::kIbp;
  if (sharding::is_tensor_parallel(plan) && a.spec_parallel) {
    throw InvalidArgument("--spec-parallel with --shard " + std::string(enum_name(plan)) + ": " +
                          spec_parallel_tensor_parallel_refusal());
  }

  // Load, check and shard on every rank (cli/run_setup.hpp); a failure anywhere stops every rank.
  InputBox cpu_box;
  ProblemInput loaded = load_agreed(a, *comm, [&](const ProblemInput& in) {
    cpu_box = io::box_of(in.problem.property.cases.front(), in.problem.graph, dtype);
    check_deadline(deadline, "while loading");
  });
  BoundGraph& graph = loaded.problem.graph;
  // The tensor-parallel plan is printed by rank 0 with the results.
  const std::string tp_plan =
      place(a, graph, *comm, comm, [&] { check_deadline(deadline, "while sharding"); }).tp_plan;
  const InputBox box{cpu_box.lower.to(device), cpu_box.upper.to(device)};

  // Tensor bytes on the device the bounds are computed on: the counting CPU allocator, or the CUDA
  // caching allocator's statistics.
  RankReport mine;
  mine.baseline = memory::usage(box.lower.device()).live_bytes;
  memory::reset_peak(box.lower.device());
  comm->reset_stats();
  const auto t0 = std::chrono::steady_clock::now();
  Interval b;
  try {
    PassContext context;
    if (a.spec_parallel) context.spec_comm = comm;
    // Every rank runs the same passes (FSDP gathers, spec-parallel splits rows inside them).
    context = context.limited_to(memory_limit_bytes(a), comm);
    // α-CROWN stops optimising at the deadline (the check below then reports it); across ranks
    // at the same iteration, agreed, so that no rank leaves the collectives of the next one.
    if (method == Method::kAlphaCrown) {
      context.optimise_until = deadline.agreed_by(collective::expiry_agreement(comm));
    }
    const MethodBounds r =
        compute_bounds(graph, box, method, a.alpha.with_bound(options), {}, context);
    b = r.bounds;
    mine.alpha = r.alpha_bytes;
    mine.starts_left_out = r.starts_left_out;
    mine.memory_limited = r.memory_limited ? 1 : 0;
  } catch (const std::exception& e) {
    if (comm->size() == 1) throw;
    // The other ranks may be waiting in a collective: end them all.
    std::fprintf(stderr, "distcrown: error: rank %d: %s\n", comm->rank(), e.what());
    collective::abort_all_ranks(1);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mine.peak = memory::usage(box.lower.device()).peak_bytes;
  mine.comm = comm->stats();
  const std::vector<RankReport> reports = gather_reports(*comm, mine);
  collective::run_agreed(*comm, [&] { check_deadline(deadline, "while bounding"); });
  if (comm->rank() != 0) return 0;

  if (!tp_plan.empty()) std::printf("%s", tp_plan.c_str());
  const auto lower = to_doubles(b.lower);
  const auto upper = to_doubles(b.upper);
  print_table(a, lower, upper, dtype == at::kDouble);
  int64_t max_peak = 0;
  int64_t max_base = 0;
  for (const auto& r : reports) {
    max_peak = std::max(max_peak, r.peak);
    max_base = std::max(max_base, r.baseline);
  }
  std::printf(
      "time %.4f s, %d rank(s), shard %s%s, memory per rank: baseline %.2f MB, peak %.2f MB\n",
      seconds, comm->size(), std::string(enum_name(a.shard)).c_str(),
      a.spec_parallel ? " + spec-parallel" : "", double(max_base) / 1e6, double(max_peak) / 1e6);
  if (method == Method::kAlphaCrown) {
    int64_t max_alpha = 0;
    for (const auto& r : reports) max_alpha = std::max(max_alpha, r.alpha);
    std::printf("alpha per rank: %.3f MB\n", double(max_alpha) / 1e6);
  }
  if (!a.result.empty()) write_json(a, lower, upper, seconds, comm->size(), reports);
  return 0;
}

}  // namespace

Action add_bounds_command(CLI::App& app) {
  return add_command(app, Command::kBounds,
                     "Bound the network's outputs over the property's first input box", run_bounds);
}

}  // namespace distcrown::cli
