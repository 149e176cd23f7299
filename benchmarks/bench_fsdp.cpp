// bench_fsdp: per-rank memory and time of sharded CROWN, each configuration in its own process
// (mpirun -np P build/bin/distcrown bounds ... --result), on the wide MLPs of the reference paper
// (input 784, output 10, batch 1, eps 0.02; (h, d) = (1024,4), (4096,4), (8192,4), (4096,8)) and a
// small convolutional net, for P in --procs and the modes none / fsdp / spec / fsdp+spec, with and
// without --crown-batch-size. Beside each measured peak it prints the peak the sharding
// arithmetic predicts from the P = 1 run of the same model and chunking:
//   baseline_pred = W/P (fsdp) or W (none);  A = peak(P=1) − baseline(P=1)
//   peak_pred     = baseline_pred + largest parameter (fsdp) + A/P (spec) or A
//
//   build/bin/bench_fsdp [--models mlp1024x4,mlp4096x8,conv] [--procs 1,2,4] [--chunk 512]
//                        [--modes fsdp,spec,fsdp+spec] [--csv out.csv]
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/synthetic.hpp"

namespace {

namespace fs = std::filesystem;
using distcrown::io::OnnxModel;

struct ModelSpec {
  std::string name;
  OnnxModel onnx;
  std::vector<int64_t> input_shape;
};

ModelSpec make_model(const std::string& name) {
  using namespace distcrown::io;
  if (name == "conv") return {name, random_convnet_onnx(1024, 0), {1, 1, 28, 28}};
  int64_t h = 0;
  int d = 0;
  if (std::sscanf(name.c_str(), "mlp%ldx%d", &h, &d) != 2) {
    throw std::runtime_error("unknown model " + name + " (mlpHxD or conv)");
  }
  return {name, random_mlp_onnx(784, h, d, 10, 0), {1, 784}};
}

int64_t largest_param_bytes(const OnnxModel& m) {
  size_t best = 0;
  for (const auto& t : m.initializers) best = std::max(best, t.bytes.size());
  return int64_t(best);
}

struct Run {
  int procs;
  std::string mode;  // none, fsdp, spec, fsdp+spec
  int64_t chunk;
  double time_s = 0;
  double comm_s = 0;
  int64_t baseline = 0;  // max over ranks
  int64_t peak = 0;      // max over ranks
  bool ok = false;
};

Run launch(const std::string& cli, const std::string& mpirun, const fs::path& dir,
           const std::string& model, int procs, const std::string& mode, int64_t chunk) {
  Run r{procs, mode, chunk};
  const fs::path json = dir / "out.json";
  ::unlink(json.c_str());  // std::filesystem's remove clashes with LibTorch's exported copy
  std::ostringstream cmd;
  cmd << "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " << mpirun << " -np " << procs
      << " --oversubscribe -x OMP_NUM_THREADS=1 " << cli << " bounds --model "
      << (dir / (model + ".onnx")) << " --vnnlib " << (dir / (model + ".vnnlib"))
      << " --method crown --result " << json;
  if (mode == "fsdp" || mode == "fsdp+spec") cmd << " --shard fsdp";
  if (mode == "spec" || mode == "fsdp+spec") cmd << " --spec-parallel";
  if (chunk > 0) cmd << " --crown-batch-size " << chunk;
  cmd << " > " << (dir / "log.txt") << " 2>&1";
  if (std::system(cmd.str().c_str()) != 0 || !fs::exists(json)) {
    std::fprintf(stderr, "failed: %s\n", cmd.str().c_str());
    return r;
  }
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  r.time_s = j["time_s"].get<double>();
  r.baseline = j["memory"]["baseline_bytes"].get<int64_t>();
  r.peak = j["memory"]["peak_bytes"].get<int64_t>();
  for (const auto& rank : j["memory"]["ranks"]) {
    r.comm_s = std::max(r.comm_s, rank["comm"]["time_s"].get<double>());
  }
  r.ok = true;
  return r;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_fsdp"};
  std::string models = "mlp1024x4,mlp4096x4,mlp8192x4,mlp4096x8,conv";
  std::string procs = "1,2,4";
  std::string modes = "fsdp,spec,fsdp+spec";
  int64_t chunk = 512;
  std::string csv;
  std::string cli = DISTCROWN_CLI_PATH;
  std::string mpirun = DISTCROWN_MPIRUN;
  std::string workdir = "/tmp/distcrown_bench_fsdp";
  app.add_option("--models", models, "comma-separated: mlpHxD, conv")->capture_default_str();
  app.add_option("--procs", procs, "comma-separated world sizes")->capture_default_str();
  app.add_option("--modes", modes, "modes at P > 1 (none, fsdp, spec, fsdp+spec)")
      ->capture_default_str();
  app.add_option("--chunk", chunk, "--crown-batch-size of the chunked runs (0: none)")
      ->capture_default_str();
  app.add_option("--csv", csv, "also write the rows as CSV (for scripts/plot_fsdp.py)");
  app.add_option("--cli", cli, "distcrown executable")->capture_default_str();
  app.add_option("--mpirun", mpirun, "mpirun executable")->capture_default_str();
  app.add_option("--workdir", workdir, "where models and outputs are written");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir(workdir);
  ::mkdir(workdir.c_str(), 0755);
  std::ofstream csv_out;
  if (!csv.empty()) {
    csv_out.open(csv);
    csv_out << "model,procs,mode,chunk,baseline_mb,peak_mb,pred_peak_mb,peak_vs_p1,time_s,"
               "comm_share\n";
  }
  std::printf("| %-10s | %2s | %-9s | %5s | %11s | %9s | %12s | %7s | %8s | %6s |\n", "model", "P",
              "mode", "chunk", "baseline MB", "peak MB", "predicted MB", "vs P=1", "time s",
              "comm %");
  std::printf(
      "|------------|----|-----------|-------|-------------|-----------|--------------|"
      "---------|----------|--------|\n");
  std::vector<int64_t> chunks{0};
  if (chunk > 0) chunks.push_back(chunk);
  for (const std::string& name : split(models)) {
    const ModelSpec m = make_model(name);
    {
      std::ofstream(dir / (name + ".onnx"), std::ios::binary)
          << distcrown::io::serialize_onnx_model(m.onnx);
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
      int64_t n = 1;
      for (int64_t d : m.input_shape) n *= d;
      const at::Tensor x = at::empty({n}, at::kDouble).uniform_(0, 1, gen);
      std::vector<double> centre(x.data_ptr<double>(), x.data_ptr<double>() + n);
      std::ofstream(dir / (name + ".vnnlib")) << distcrown::io::box_property(centre, 0.02, 10);
    }
    const int64_t largest = largest_param_bytes(m.onnx);
    for (int64_t c : chunks) {
      Run p1;
      for (const std::string& ps : split(procs)) {
        const int P = std::stoi(ps);
        const std::vector<std::string> run_modes =
            P == 1 ? std::vector<std::string>{"none"} : split(modes);
        for (const std::string& mode : run_modes) {
          const Run r = launch(cli, mpirun, dir, name, P, mode, c);
          if (P == 1) p1 = r;
          if (!r.ok) continue;
          double pred = 0;
          if (p1.ok) {
            const bool fsdp = mode.find("fsdp") != std::string::npos;
            const bool spec = mode.find("spec") != std::string::npos;
            const double W = double(p1.baseline);
            const double A = double(p1.peak - p1.baseline);
            pred = (fsdp ? W / P + double(largest) : W) + (spec ? A / P : A);
          }
          const double vs = p1.ok ? double(r.peak) / double(p1.peak) : 0;
          const double share = r.time_s > 0 ? 100.0 * r.comm_s / r.time_s : 0;
          std::printf(
              "| %-10s | %2d | %-9s | %5s | %11.1f | %9.1f | %12.1f | %6.2fx | %8.2f | %5.1f%% |\n",
              name.c_str(), P, mode.c_str(), c ? std::to_string(c).c_str() : "-", r.baseline / 1e6,
              r.peak / 1e6, pred / 1e6, vs, r.time_s, share);
          std::fflush(stdout);
          if (csv_out) {
            csv_out << name << ',' << P << ',' << mode << ',' << c << ',' << r.baseline / 1e6 << ','
                    << r.peak / 1e6 << ',' << pred / 1e6 << ',' << vs << ',' << r.time_s << ','
                    << share << "\n";
          }
        }
      }
    }
  }
  return 0;
}
