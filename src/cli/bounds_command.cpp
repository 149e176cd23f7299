// `distcrown bounds`: bounds of the network's outputs (C = identity) over the property's first
// input box, as a table on stdout and optionally JSON (the contract in README.md).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/embedded_default.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

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
};

io::Problem load(const BoundsArgs& a) {
  if (a.model.empty() != a.vnnlib.empty()) {
    throw InvalidArgument("give both --model and --vnnlib, or neither for the embedded default");
  }
  if (!a.model.empty()) return io::load_problem(a.model, a.vnnlib);
  io::Problem p{io::load_onnx_bytes(embedded_model_bytes(), kEmbeddedModelName),
                io::parse_vnnlib_string(embedded_property_text(), kEmbeddedPropertyName)};
  io::check_fits(p.graph, p.property);
  return p;
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous().reshape({-1});
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// Floats written exactly: %.9g round-trips float32, %.17g float64.
std::string exact(double v, bool is_double) {
  char buf[40];
  std::snprintf(buf, sizeof buf, is_double ? "%.17g" : "%.9g", v);
  return buf;
}

int run_bounds(const BoundsArgs& a) {
  c10::NoGradGuard no_grad;
  const at::ScalarType dtype = a.dtype == "float64" ? at::kDouble : at::kFloat;
  BoundOptions options;
  options.crown_batch_size = a.crown_batch_size;
  options.scheme =
      a.intermediate == "tight" ? IntermediateScheme::kTight : IntermediateScheme::kAutoLirpa;
  const Method method = parse_method(a.method);

  io::Problem problem = load(a);
  problem.graph.to_dtype(dtype);
  const InputBox box = io::box_of(problem.property.cases.front(), problem.graph, dtype);
  const int64_t baseline = memory::live_bytes();
  memory::reset_peak();

  const auto t0 = std::chrono::steady_clock::now();
  const Interval b = compute_bounds(problem.graph, box, method, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t peak = memory::peak_bytes();

  const auto lower = to_vector(b.lower);
  const auto upper = to_vector(b.upper);
  const bool dbl = dtype == at::kDouble;
  std::printf("%s bounds of %zu outputs (%s)\n", a.method.c_str(), lower.size(),
              a.model.empty() ? kEmbeddedModelName : a.model.c_str());
  std::printf("%6s %16s %16s\n", "output", "lower", "upper");
  for (size_t i = 0; i < lower.size(); ++i) {
    std::printf("%6s %16s %16s\n", ("Y_" + std::to_string(i)).c_str(),
                exact(lower[i], dbl).c_str(), exact(upper[i], dbl).c_str());
  }
  std::printf("time %.4f s, memory baseline %.2f MB, peak %.2f MB\n", seconds, baseline / 1e6,
              peak / 1e6);

  if (!a.json.empty()) {
    // Numbers go through the json library as doubles; float32 values are exact in a double and
    // nlohmann writes the shortest representation that round-trips.
    nlohmann::json j;
    j["method"] = a.method;
    j["lower"] = lower;
    j["upper"] = upper;
    j["time_s"] = seconds;
    j["dtype"] = a.dtype;
    j["memory"] = {{"baseline_bytes", baseline}, {"peak_bytes", peak}};
    std::ofstream out(a.json);
    if (!out) throw InvalidArgument("cannot write " + a.json);
    out << j.dump(2) << "\n";
    if (!out) throw InvalidArgument("error writing " + a.json);
  }
  return 0;
}

}  // namespace

Action add_bounds_command(CLI::App& app) {
  auto args = std::make_shared<BoundsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bounds", "Bound the network's outputs over the property's first input box");
  cmd->add_option("--model", args->model, "ONNX model (default: the embedded digits MLP)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--vnnlib", args->vnnlib, "VNNLIB property (default: the embedded one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--method", args->method, "ibp or crown")
      ->check(CLI::IsMember({"ibp", "crown"}))
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
  return [args] { return run_bounds(*args); };
}

}  // namespace distcrown::cli
