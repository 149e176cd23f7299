// bench_bounds: time and peak memory of IBP and CROWN (and with --alpha α-CROWN, 20 iterations)
// on the fixture models, and of CROWN on the wide MLPs the reference paper measured (input 784,
// batch 1, Linf eps 0.02, random weights with a fixed seed), with and without --crown-batch-size.
// Prints one table.
//
//   build/bin/bench_bounds [--fixtures DIR] [--repeat R] [--chunk N] [--only fixtures|wide|ops]
//                          [--ops-case NAME ...] [--conv-mode matrix|patches] [--alpha]
//                          [--patches-pass-bytes N]
//                          [--case SUBSTRING] [--device cpu|cuda]
// --only ops measures the refs/ops cases named by --ops-case (networks beyond ReLU) alone.
//
// Memory is live tensor bytes (counting allocator): baseline after loading, peak during bounding.
// --device cuda (fixtures and ops tables): the model and box on the GPU, each run timed until its
// bounds are back on the host, memory from the CUDA caching allocator (allocated bytes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "io/synthetic.hpp"

namespace {

using namespace distcrown;

struct Row {
  std::string model;
  std::string method;
  int64_t chunk;
  double median_s;
  double baseline_mb;
  double peak_mb;
  double ref_peak_mb;  // 0 = no reference
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Row measure(const std::string& name, const BoundGraph& g, const InputBox& box, Method method,
            int64_t chunk, int repeat, double ref_peak_mb, const BoundOptions& base = {}) {
  BoundOptions opt = base;
  opt.crown_batch_size = chunk;
  std::vector<double> times;
  int64_t peak = 0;
  const at::Device device = box.lower.device();
  const int64_t baseline = memory::usage(device).live_bytes;
  for (int r = 0; r < repeat; ++r) {
    memory::reset_peak(device);
    const auto t0 = std::chrono::steady_clock::now();
    Interval b = compute_bounds(g, box, method, opt);
    // On the GPU the kernels run asynchronously: the copy to the host waits for them.
    if (device.is_cuda()) b.lower.to(at::kCPU);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    b = {};
    peak = std::max(peak, memory::usage(device).peak_bytes);
  }
  return {name, to_string(method), chunk, median(times), baseline / 1e6, peak / 1e6, ref_peak_mb};
}

void print(const Row& r) {
  char ref[64] = "-";
  if (r.ref_peak_mb > 0) {
    std::snprintf(ref, sizeof ref, "%.1f (%.2fx)", r.ref_peak_mb, r.peak_mb / r.ref_peak_mb);
  }
  std::printf("| %-28s | %-5s | %6s | %9.3f | %11.1f | %9.1f | %-18s |\n", r.model.c_str(),
              r.method.c_str(), r.chunk ? std::to_string(r.chunk).c_str() : "-", r.median_s,
              r.baseline_mb, r.peak_mb, ref);
  std::fflush(stdout);
}

// Largest |ours − ref| / max(|ref|, 1e-5) over lower and upper.
double max_relative_deviation(const Interval& b, const nlohmann::json& ref) {
  double worst = 0;
  for (const auto& [key, t] : {std::pair{"lower", b.lower}, std::pair{"upper", b.upper}}) {
    const auto r = ref[key].get<std::vector<double>>();
    const at::Tensor got = t.to(at::kCPU, at::kDouble).reshape({-1}).contiguous();
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = std::abs(got[int64_t(i)].item<double>() - r[i]);
      worst = std::max(worst, d / std::max(std::abs(r[i]), 1e-5));
    }
  }
  return worst;
}

// Largest amount by which our bounds are looser than ref's, relative to max(|ref|, 1e-5) (α-CROWN
// is an optimisation: only looseness counts).
double max_relative_looseness(const Interval& b, const nlohmann::json& ref) {
  double worst = 0;
  for (const auto& [key, t] : {std::pair{"lower", b.lower}, std::pair{"upper", b.upper}}) {
    const auto r = ref[key].get<std::vector<double>>();
    const at::Tensor got = t.to(at::kCPU, at::kDouble).reshape({-1}).contiguous();
    const double sign = std::string(key) == "lower" ? 1.0 : -1.0;  // lower: below ref is looser
    for (size_t i = 0; i < r.size(); ++i) {
      const double looser = sign * (r[i] - got[int64_t(i)].item<double>());
      worst = std::max(worst, looser / std::max(std::abs(r[i]), 1e-5));
    }
  }
  return worst;
}

// Every reference case: our time (median of `repeat`) against auto_LiRPA's compute_bounds time
// recorded with the reference (same kind of 2-core machine, 1 thread), agreement, and memory.
void print_fixture_table(const std::string& fixtures, int repeat,
                         const std::vector<std::filesystem::path>& files, const BoundOptions& base,
                         bool alpha, const at::Device& device) {
  namespace fs = std::filesystem;
  std::printf("| %-26s | %-11s | %9s | %13s | %7s | %13s | %9s |\n", "case", "method", "median s",
              "auto_LiRPA s", "speedup", "max rel. dev.", "peak MB");
  std::printf(
      "|----------------------------|-------------|-----------|---------------|---------|"
      "---------------|-----------|\n");
  for (const auto& f : files) {
    std::ifstream in(f);
    const auto ref = nlohmann::json::parse(in);
    BoundGraph g;
    try {
      g = io::load_onnx((fs::path(fixtures) / ref["model"].get<std::string>()).string());
    } catch (const UnsupportedError& e) {
      std::printf("| %-26s | not loaded: %s\n", f.stem().string().c_str(), e.what());
      continue;
    }
    const auto shape = ref["input_shape"].get<std::vector<int64_t>>();
    auto vec = [&](const char* key) {
      return at::tensor(ref[key].get<std::vector<double>>(), at::kDouble)
          .to(at::kFloat)
          .reshape(shape);
    };
    g.to_device(device);
    const InputBox box{vec("input_lower").to(device), vec("input_upper").to(device)};
    std::vector<Method> methods{Method::kIbp, Method::kCrown};
    if (alpha) methods.push_back(Method::kAlphaCrown);
    for (Method m : methods) {
      // The references spell alpha-crown "alpha_crown".
      std::string key(to_string(m));
      std::replace(key.begin(), key.end(), '-', '_');
      Row r{};
      Interval b;
      try {
        r = measure(f.stem().string(), g, box, m, 0, repeat, 0, base);
        b = compute_bounds(g, box, m, base);
      } catch (const NumericError& e) {  // the ViT's IBP: exp overflows, as auto_LiRPA's fails
        std::printf("| %-26s | %-11s | %s\n", f.stem().string().c_str(), key.c_str(), e.what());
        continue;
      }
      if (!ref.contains(key)) {  // auto_LiRPA could not run it (the ref's note says why)
        std::printf("| %-26s | %-11s | %9.4f | %13s | %7s | %13s | %9.1f |\n", r.model.c_str(),
                    key.c_str(), r.median_s, "-", "-", "-", r.peak_mb);
        continue;
      }
      const double theirs = ref["timing_s"][key]["compute_bounds_s"].get<double>();
      // α-CROWN: how much looser than the reference (never more than 1e-3·|ref| by the tests).
      const double dev = m == Method::kAlphaCrown ? max_relative_looseness(b, ref[key])
                                                  : max_relative_deviation(b, ref[key]);
      std::printf("| %-26s | %-11s | %9.4f | %13.4f | %6.1fx | %13.2e | %9.1f |\n", r.model.c_str(),
                  key.c_str(), r.median_s, theirs, theirs / r.median_s, dev, r.peak_mb);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  memory::install_counting_allocator();
  memory::keep_freed_heap();  // fewer page faults; see memory.hpp
  c10::NoGradGuard no_grad;
  CLI::App app{"bench_bounds"};
  std::string fixtures = DISTCROWN_DEFAULT_FIXTURES;
  int repeat = 3;
  int64_t chunk = 512;
  std::string only;
  int threads = 1;
  app.add_option("--fixtures", fixtures, "fixtures folder")->capture_default_str();
  app.add_option("--repeat", repeat, "runs per configuration (median reported)");
  app.add_option("--chunk", chunk, "--crown-batch-size used for the chunked rows");
  std::vector<std::string> ops_cases;
  std::string case_filter;
  app.add_option("--only", only, "fixtures, wide or ops");
  app.add_option("--case", case_filter, "only the fixture cases whose name contains this");
  app.add_option("--ops-case", ops_cases, "a case of refs/ops (with --only ops)");
  app.add_option("--threads", threads, "torch intra-op threads");
  std::string conv_mode(enum_name(BoundOptions{}.conv_mode));  // the library's default
  app.add_option("--conv-mode", conv_mode, "matrix or patches (fixtures and ops tables)")
      ->capture_default_str();
  BoundOptions base;  // fixtures and ops tables
  app.add_option("--patches-pass-bytes", base.patches_pass_bytes,
                 "BoundOptions::patches_pass_bytes (0: passes sized by pass_bytes alone)")
      ->capture_default_str();
  bool alpha = false;
  app.add_flag("--alpha", alpha, "alpha-CROWN rows too (fixtures and ops tables)");
  std::string device_name = "cpu";
  app.add_option("--device", device_name, "cpu or cuda (fixtures and ops tables)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const at::Device device = device_name == "cuda" ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  if (device.is_cuda() && !at::hasCUDA()) {
    std::fprintf(stderr, "bench_bounds: --device cuda, but LibTorch sees no CUDA device\n");
    return 1;
  }
  at::set_num_threads(threads);
  base.conv_mode = parse_enum<ConvMode>(conv_mode, "conv mode");

  namespace fs = std::filesystem;
  if (only.empty() || only == "fixtures") {
    if (!fs::is_directory(fs::path(fixtures) / "refs")) {
      std::printf("(fixtures not found at %s: skipped)\n", fixtures.c_str());
    } else {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(fs::path(fixtures) / "refs")) {
        if (e.path().extension() == ".json" &&
            e.path().stem().string().find(case_filter) != std::string::npos) {
          files.push_back(e.path());
        }
      }
      std::sort(files.begin(), files.end());
      print_fixture_table(fixtures, repeat, files, base, alpha, device);
    }
  }
  if (only == "ops") {
    std::vector<fs::path> files;
    files.reserve(ops_cases.size());
    for (const std::string& name : ops_cases) {
      files.push_back(fs::path(fixtures) / "refs" / "ops" / (name + ".json"));
    }
    print_fixture_table(fixtures, repeat, files, base, alpha, device);
  }
  if (only.empty() || only == "wide") {
    std::printf("\n| %-28s | %-5s | %6s | %9s | %11s | %9s | %-18s |\n", "model", "method", "chunk",
                "median s", "baseline MB", "peak MB", "ref peak MB (ratio)");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(),
                std::string(7, '-').c_str(), std::string(8, '-').c_str(),
                std::string(11, '-').c_str(), std::string(13, '-').c_str(),
                std::string(11, '-').c_str(), std::string(20, '-').c_str());
    struct Wide {
      int64_t h;
      int d;
      double ref_peak_mb;  // auto_LiRPA single-device peak measured by the reference paper
    };
    for (const Wide w : {Wide{1024, 4, 149.6}, Wide{4096, 4, 1944.9}, Wide{8192, 4, 7593.9},
                         Wide{4096, 8, 7934.0}}) {
      const std::string name = "mlp 784-" + std::to_string(w.h) + "x" + std::to_string(w.d);
      BoundGraph g = io::make_random_mlp(784, w.h, w.d, 10, /*seed=*/0);
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
      const at::Tensor x = at::empty({1, 784}, at::kFloat).uniform_(0, 1, gen);
      const InputBox box{x - 0.02, x + 0.02};
      const int reps = w.h >= 4096 ? 1 : repeat;
      print(measure(name, g, box, Method::kCrown, 0, reps, w.ref_peak_mb));
      print(measure(name, g, box, Method::kCrown, chunk, reps, w.ref_peak_mb));
    }
  }
  return 0;
}
