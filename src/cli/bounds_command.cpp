// `distcrown bounds`: bounds of the network's outputs (C = identity) over the property's first
// input box, as a table on stdout and optionally JSON (the contract in README.md). Under mpirun
// every rank runs this; rank 0 prints and writes, with every rank's memory in the report.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/embedded_default.hpp"
#include "cli/problem_input.hpp"
#include "cli/world.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/tensor_values.hpp"

namespace distcrown::cli {
namespace {

struct BoundsArgs {
  std::string model;
  std::string vnnlib;
  std::string method = "crown";
  std::string json;
  std::string dtype = "float32";
  std::string intermediate = "auto_lirpa";
  int64_t crown_batch_size = 0;
  std::string shard = "none";
  bool spec_parallel = false;
  std::string device = "cpu";
  std::string backend = "auto";
  int iterations = 20;
  double lr = 0.5;
};

// Floats written exactly: %.9g round-trips float32, %.17g float64.
std::string exact(double v, bool is_double) {
  char buf[40];
  std::snprintf(buf, sizeof buf, is_double ? "%.17g" : "%.9g", v);
  return buf;
}

// The model and property, and a fingerprint of them and of the options that change the result.
struct Loaded {
  io::Problem problem;
  std::string fingerprint;
};

Loaded load(const BoundsArgs& a) {
  ProblemInput in = load_problem_input(a.model, a.vnnlib);
  Loaded l{std::move(in.problem), {}};
  const std::string options = a.method + "|" + a.dtype + "|" + a.intermediate + "|" +
                              std::to_string(a.crown_batch_size) + "|" + a.shard + "|" +
                              (a.spec_parallel ? "spec" : "nospec") + "|" + a.device + "|" +
                              std::to_string(a.iterations) + "|" + exact(a.lr, true);
  l.fingerprint = collective::fingerprint(in.model_bytes) +
                  collective::fingerprint(in.property_text) + collective::fingerprint(options);
  return l;
}

struct RankReport {
  int64_t baseline = 0;
  int64_t peak = 0;
  collective::CommStats comm;
};

std::vector<RankReport> gather_reports(collective::Communicator& comm, const RankReport& mine) {
  std::ostringstream s;
  s << mine.baseline << ' ' << mine.peak << ' ' << mine.comm.calls << ' ' << mine.comm.bytes << ' '
    << exact(mine.comm.time_s, true);
  std::vector<RankReport> all;
  for (const std::string& text : comm.all_gather_strings(s.str())) {
    std::istringstream in(text);
    RankReport r;
    in >> r.baseline >> r.peak >> r.comm.calls >> r.comm.bytes >> r.comm.time_s;
    all.push_back(r);
  }
  return all;
}

void print_table(const BoundsArgs& a, const std::vector<double>& lower,
                 const std::vector<double>& upper, bool dbl) {
  std::printf("%s bounds of %zu outputs (%s)\n", a.method.c_str(), lower.size(),
              a.model.empty() ? kEmbeddedModelName : a.model.c_str());
  std::printf("%6s %16s %16s\n", "output", "lower", "upper");
  for (size_t i = 0; i < lower.size(); ++i) {
    std::printf("%6s %16s %16s\n", ("Y_" + std::to_string(i)).c_str(), exact(lower[i], dbl).c_str(),
                exact(upper[i], dbl).c_str());
  }
}

void write_json(const BoundsArgs& a, const std::vector<double>& lower,
                const std::vector<double>& upper, double seconds, int world,
                const std::vector<RankReport>& reports) {
  // Numbers go through the json library as doubles; float32 values are exact in a double and
  // nlohmann writes the shortest representation that round-trips.
  nlohmann::json j;
  j["method"] = a.method;
  j["lower"] = lower;
  j["upper"] = upper;
  j["time_s"] = seconds;
  j["dtype"] = a.dtype;
  j["world_size"] = world;
  j["shard"] = a.shard;
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
  }
  j["memory"] = {{"baseline_bytes", max_base}, {"peak_bytes", max_peak}, {"ranks", ranks}};
  const collective::CommStats& c0 = reports.front().comm;
  j["comm"] = {{"calls", c0.calls}, {"bytes", c0.bytes}, {"time_s", c0.time_s}};
  std::ofstream out(a.json);
  if (!out) throw InvalidArgument("cannot write " + a.json);
  out << j.dump(2) << "\n";
  if (!out) throw InvalidArgument("error writing " + a.json);
}

int run_bounds(const BoundsArgs& a) {
  c10::NoGradGuard no_grad;
  const collective::CommPtr comm = make_world(a.backend, a.device);
  const at::ScalarType dtype = a.dtype == "float64" ? at::kDouble : at::kFloat;
  const at::Device device = a.device == "cuda" ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  BoundOptions options;
  options.crown_batch_size = a.crown_batch_size;
  options.scheme =
      a.intermediate == "tight" ? IntermediateScheme::kTight : IntermediateScheme::kAutoLirpa;
  const Method method = parse_method(a.method);
  const sharding::ShardPlan plan = sharding::parse_shard_plan(a.shard);
  // Tensor parallelism (sharding/partitioner.hpp): `tp` keeps IBP bounds inside sharded zones.
  if (plan == sharding::ShardPlan::kTp) options.sharded_intermediate = ShardedIntermediate::kIbp;
  if (sharding::is_tensor_parallel(plan) && a.spec_parallel) {
    throw InvalidArgument("--spec-parallel cannot be combined with --shard " + a.shard);
  }

  // Load, check and shard on every rank; a failure anywhere stops every rank here.
  std::optional<Loaded> loaded;
  InputBox box;
  collective::run_agreed(*comm, [&] {
    loaded.emplace(load(a));
    loaded->problem.graph.to_dtype(dtype);
    box = io::box_of(loaded->problem.property.cases.front(), loaded->problem.graph, dtype);
  });
  collective::check_same_inputs(*comm, loaded->fingerprint);
  BoundGraph& graph = loaded->problem.graph;
  std::string tp_plan;  // printed by rank 0 with the results
  collective::run_agreed(*comm, [&] {
    if (sharding::is_tensor_parallel(plan)) {
      tp_plan = sharding::describe(sharding::partition_tensor_parallel(graph, comm), graph);
    } else {
      sharding::shard_graph(graph, plan, comm);
    }
    graph.to_device(device);
    box = {box.lower.to(device), box.upper.to(device)};
  });

  // Tensor bytes on the device the bounds are computed on: the counting CPU allocator, or the CUDA
  // caching allocator's statistics.
  const int cuda_index = device.is_cuda() ? box.lower.device().index() : -1;
  RankReport mine;
  if (device.is_cuda()) {
    mine.baseline = memory::cuda_usage(cuda_index).live_bytes;
    memory::reset_cuda_peak(cuda_index);
  } else {
    mine.baseline = memory::live_bytes();
    memory::reset_peak();
  }
  comm->reset_stats();
  const auto t0 = std::chrono::steady_clock::now();
  Interval b;
  try {
    if (method == Method::kAlphaCrown) {
      if (a.spec_parallel) throw UnsupportedError("--spec-parallel with alpha-crown");
      AlphaOptions alpha;
      alpha.iterations = a.iterations;
      alpha.lr = a.lr;
      b = alpha_crown(graph, box, {}, alpha, options).bounds;
    } else {
      b = compute_bounds(graph, box, method, options, {}, a.spec_parallel ? comm : nullptr);
    }
  } catch (const std::exception& e) {
    if (comm->size() == 1) throw;
    // The other ranks may be waiting in a collective: end them all.
    std::fprintf(stderr, "distcrown: error: rank %d: %s\n", comm->rank(), e.what());
    collective::abort_all_ranks(1);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mine.peak = device.is_cuda() ? memory::cuda_usage(cuda_index).peak_bytes : memory::peak_bytes();
  mine.comm = comm->stats();
  const std::vector<RankReport> reports = gather_reports(*comm, mine);
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
      seconds, comm->size(), a.shard.c_str(), a.spec_parallel ? " + spec-parallel" : "",
      double(max_base) / 1e6, double(max_peak) / 1e6);
  if (!a.json.empty()) write_json(a, lower, upper, seconds, comm->size(), reports);
  return 0;
}

}  // namespace

Action add_bounds_command(CLI::App& app) {
  auto args = std::make_shared<BoundsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bounds", "Bound the network's outputs over the property's first input box");
  add_problem_options(*cmd, args->model, args->vnnlib);
  cmd->add_option("--method", args->method, "ibp, crown or alpha-crown")
      ->check(CLI::IsMember({"ibp", "crown", "alpha-crown"}))
      ->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "alpha-crown: optimisation steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--lr", args->lr, "alpha-crown: Adam learning rate for the slopes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--json", args->json, "write the bounds as JSON to this file");
  cmd->add_option("--crown-batch-size", args->crown_batch_size,
                  "bound at most N intermediate neurons per backward pass (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "float32 or float64")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  cmd->add_option("--intermediate", args->intermediate,
                  "intermediate bounds: auto_lirpa (default, matches auto_LiRPA) or tight "
                  "(CROWN for every neuron, intersected with IBP)")
      ->check(CLI::IsMember({"auto_lirpa", "tight"}))
      ->capture_default_str();
  cmd->add_option("--shard", args->shard,
                  "sharding over the ranks: none, fsdp, tp (tensor parallel, IBP inside zones) "
                  "or tp-exact (tensor parallel, CROWN inside zones)")
      ->check(CLI::IsMember({"none", "fsdp", "tp", "tp-exact"}))
      ->capture_default_str();
  cmd->add_flag("--spec-parallel", args->spec_parallel,
                "split the rows of every backward pass across the ranks");
  cmd->add_option("--device", args->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--backend", args->backend,
                  "auto (MPI under mpirun, NCCL with --device cuda), local, mpi or nccl")
      ->check(CLI::IsMember({"auto", "local", "mpi", "nccl"}))
      ->capture_default_str();
  return [args] { return run_bounds(*args); };
}

}  // namespace distcrown::cli
