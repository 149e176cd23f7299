// bench_tp: tensor parallelism (`--shard tp` / `tp-exact`), each configuration in its own process
// group under mpirun.
//
// 1. Wide MLP (input --in, one hidden layer of --hidden ReLUs, 10 outputs; batch --batch boxes
//    of radius 0.01): per-rank baseline and peak tensor bytes, propagation (CROWN) time and
//    communication of P = 1 (unsharded) and of tp at each P > 1. The wide runs are this
//    executable itself under mpirun (`bench_tp --worker ...`, the model built in memory: the
//    CLI bounds one input box, and a 4096 x 65536 ONNX file would be a GB per rank to parse).
// 2. Bound drift: Δ = max |b_P − b_1| of `distcrown bounds` (CROWN) on the mnist_fc fixtures
//    (256x2, 256x4, 256x6: 1, 2, 3 zones) and a deeper synthetic MLP (784 -> 256 x 8 -> 10: 4
//    zones), for tp and tp-exact at each P > 1, with time and communication (rank 0's counters).
//
//   build/bin/bench_tp [--procs 1,2,4] [--hidden 65536] [--batch 8] [--in 4096]
//                      [--fixtures DIR] [--csv-wide wide.csv] [--csv-drift drift.csv]
//                      [--skip-wide] [--skip-drift] [--device cpu|cuda]
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/util/memory.hpp"
#include "io/synthetic.hpp"
#include "ops/linear.hpp"
#include "ops/relu.hpp"

namespace {

using distcrown::BoundGraph;
using distcrown::GraphBuilder;
using distcrown::Interval;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// ---- worker: one wide-MLP configuration, run by every rank under mpirun ------------------------

struct WorkerArgs {
  int64_t in = 4096;
  int64_t hidden = 65536;
  int64_t batch = 8;
  std::string mode = "none";  // none, tp, tp-exact
  std::string device = "cpu";
  std::string backend = "mpi";  // mpi or nccl
  std::string json;
};

// in -> Linear(hidden) -> Relu -> Linear(10), PyTorch's default init, seeded: every rank builds
// the same full model (the partitioner then keeps its share and frees the rest).
BoundGraph wide_mlp(int64_t in, int64_t hidden) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2026);
  auto uniform = [&](const std::vector<int64_t>& shape, int64_t fan_in) {
    const double k = 1.0 / std::sqrt(double(fan_in));
    return at::empty(shape, at::kFloat).uniform_(-k, k, gen);
  };
  GraphBuilder b({1, in});
  using distcrown::make_param;
  const int h = b.add("fc1",
                      distcrown::ops::make_linear(make_param(uniform({hidden, in}, in)),
                                                  make_param(uniform({hidden}, in))),
                      {0});
  const int r = b.add("relu1", distcrown::ops::make_relu(), {h});
  const int o = b.add("fc2",
                      distcrown::ops::make_linear(make_param(uniform({10, hidden}, hidden)),
                                                  make_param(uniform({10}, hidden))),
                      {r});
  return std::move(b).finish(o);
}

int run_worker(const WorkerArgs& a) {
  c10::NoGradGuard no_grad;
  distcrown::memory::install_counting_allocator();
  distcrown::memory::keep_freed_heap();  // fewer page faults; see memory.hpp
  const distcrown::collective::CommPtr comm = a.backend == "nccl"
                                                  ? distcrown::collective::make_nccl_communicator()
                                                  : distcrown::collective::make_mpi_communicator();
  const at::Device device = a.device == "cuda" ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  BoundGraph g = wide_mlp(a.in, a.hidden);
  distcrown::BoundOptions opt;
  if (a.mode != "none") {
    distcrown::sharding::partition_tensor_parallel(g, comm);
    if (a.mode == "tp") opt.sharded_intermediate = distcrown::ShardedIntermediate::kIbp;
  }
  g.to_device(device);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor centre = at::empty({a.batch, a.in}, at::kFloat).uniform_(0, 1, gen);
  const distcrown::InputBox box{(centre - 0.01).to(device), (centre + 0.01).to(device)};
  const int64_t baseline = distcrown::memory::usage(box.lower.device()).live_bytes;
  distcrown::memory::reset_peak(box.lower.device());
  comm->barrier();
  comm->reset_stats();
  const auto t0 = std::chrono::steady_clock::now();
  const Interval b = distcrown::compute_bounds(g, box, distcrown::Method::kCrown, opt);
  if (device.is_cuda()) (void)b.lower.sum().item<double>();  // wait for the device
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t peak = distcrown::memory::usage(box.lower.device()).peak_bytes;
  const distcrown::collective::CommStats stats = comm->stats();
  std::ostringstream mine;
  mine << baseline << ' ' << peak << ' ' << stats.calls << ' ' << stats.bytes << ' ' << stats.time_s
       << ' ' << seconds;
  const std::vector<std::string> all = comm->all_gather_strings(mine.str());
  if (comm->rank() != 0) return 0;
  nlohmann::json j;
  j["lower_sum"] = b.lower.sum().item<double>();
  j["ranks"] = nlohmann::json::array();
  for (const std::string& s : all) {
    std::istringstream in(s);
    int64_t base = 0, pk = 0, calls = 0, bytes = 0;
    double ct = 0, t = 0;
    in >> base >> pk >> calls >> bytes >> ct >> t;
    j["ranks"].push_back({{"baseline_bytes", base},
                          {"peak_bytes", pk},
                          {"comm_calls", calls},
                          {"comm_bytes", bytes},
                          {"comm_s", ct},
                          {"time_s", t}});
  }
  std::ofstream(a.json) << j.dump(2) << "\n";
  return 0;
}

// ---- driver -----------------------------------------------------------------------------------

std::string mpirun_prefix(const std::string& mpirun, int procs) {
  std::ostringstream cmd;
  cmd << "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " << mpirun << " -np " << procs
      << " --oversubscribe -x OMP_NUM_THREADS=1 ";
  return cmd.str();
}

bool run(const std::string& cmd, const std::string& json) {
  ::unlink(json.c_str());  // std::filesystem's remove clashes with LibTorch's exported copy
  if (std::system(cmd.c_str()) != 0 || !file_exists(json)) {
    std::fprintf(stderr, "failed: %s\n", cmd.c_str());
    return false;
  }
  return true;
}

struct Wide {
  double baseline = 0, peak = 0, time = 0, comm_s = 0, lower_sum = 0;  // max over ranks
  int64_t calls = 0, bytes = 0;                                        // rank 0
};

void wide_table(const std::string& self, const std::string& mpirun, const std::string& dir,
                const std::vector<int>& procs, const WorkerArgs& w, const std::string& csv) {
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv);
    out << "procs,mode,baseline_mb,peak_mb,peak_reduction,time_s,speedup,comm_calls,comm_mb,"
           "comm_share,lower_sum\n";
  }
  std::printf("\nWide MLP %lld -> %lld -> 10, batch %lld, CROWN, device %s\n\n",
              static_cast<long long>(w.in), static_cast<long long>(w.hidden),
              static_cast<long long>(w.batch), w.device.c_str());
  std::printf(
      "| P | mode | baseline MB/rank | peak MB/rank | peak P=1 / peak | time s | speed-up |"
      " comm calls | comm MB | comm %% | sum of lower bounds |\n");
  std::printf(
      "|---|------|------------------|--------------|-----------------|--------|----------|"
      "------------|---------|--------|---------------------|\n");
  Wide p1;
  for (int P : procs) {
    for (const std::string& mode : {std::string("none"), std::string("tp")}) {
      if ((P == 1) != (mode == "none")) continue;
      const std::string json = dir + "/wide.json";
      std::ostringstream cmd;
      cmd << mpirun_prefix(mpirun, P) << self << " --worker --in " << w.in << " --hidden "
          << w.hidden << " --batch " << w.batch << " --mode " << mode << " --device " << w.device
          << " --backend " << w.backend << " --json " << json << " > " << dir << "/wide.log 2>&1";
      if (!run(cmd.str(), json)) continue;
      std::ifstream in(json);
      const auto j = nlohmann::json::parse(in);
      Wide r;
      r.lower_sum = j["lower_sum"].get<double>();
      for (const auto& k : j["ranks"]) {
        r.baseline = std::max(r.baseline, double(k["baseline_bytes"].get<int64_t>()));
        r.peak = std::max(r.peak, double(k["peak_bytes"].get<int64_t>()));
        r.time = std::max(r.time, k["time_s"].get<double>());
        r.comm_s = std::max(r.comm_s, k["comm_s"].get<double>());
      }
      r.calls = j["ranks"][0]["comm_calls"].get<int64_t>();
      r.bytes = j["ranks"][0]["comm_bytes"].get<int64_t>();
      if (P == 1) p1 = r;
      const double red = p1.peak > 0 ? p1.peak / r.peak : 0;
      const double speed = p1.time > 0 ? p1.time / r.time : 0;
      const double share = r.time > 0 ? 100 * r.comm_s / r.time : 0;
      std::printf(
          "| %d | %s | %.1f | %.1f | %.2fx | %.2f | %.2fx | %lld | %.1f | %.1f%% | %.6g |\n", P,
          mode.c_str(), r.baseline / 1e6, r.peak / 1e6, red, r.time, speed,
          static_cast<long long>(r.calls), double(r.bytes) / 1e6, share, r.lower_sum);
      std::fflush(stdout);
      if (out) {
        out << P << ',' << mode << ',' << r.baseline / 1e6 << ',' << r.peak / 1e6 << ',' << red
            << ',' << r.time << ',' << speed << ',' << r.calls << ',' << double(r.bytes) / 1e6
            << ',' << share << ',' << r.lower_sum << "\n";
      }
    }
  }
}

struct Case {
  std::string name;
  int zones;
  std::string model;
  std::string vnnlib;
};

void drift_table(const std::string& cli, const std::string& mpirun, const std::string& dir,
                 const std::vector<int>& procs, const std::vector<Case>& cases,
                 const std::string& device, const std::string& backend, const std::string& csv) {
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv);
    out << "model,zones,procs,mode,delta_lower,delta_upper,delta_rel,lower_sum,time_s,comm_calls,"
           "comm_mb,comm_share\n";
  }
  std::printf(
      "\nBound drift vs one process, CROWN (Δ = max |b_P - b_1| over outputs; rel = Δ / "
      "max |b_1|)\n\n");
  std::printf(
      "| model | zones | P | mode | max abs Δlb | max abs Δub | rel | sum of lower | time s |"
      " comm calls | comm MB | comm %% |\n");
  std::printf(
      "|-------|-------|---|------|-------------|-------------|-----|--------------|--------|"
      "------------|---------|--------|\n");
  for (const Case& c : cases) {
    std::vector<double> lo1;
    std::vector<double> hi1;
    for (int P : procs) {
      for (const std::string& mode :
           {std::string("none"), std::string("tp"), std::string("tp-exact")}) {
        if ((P == 1) != (mode == "none")) continue;
        const std::string json = dir + "/drift.json";
        std::ostringstream cmd;
        cmd << mpirun_prefix(mpirun, P) << cli << " bounds --model " << c.model << " --vnnlib "
            << c.vnnlib << " --method crown --shard " << mode << " --device " << device
            << " --backend " << backend << " --result " << json << " > " << dir
            << "/drift.log 2>&1";
        if (!run(cmd.str(), json)) continue;
        std::ifstream in(json);
        const auto j = nlohmann::json::parse(in);
        const auto lo = j["lower"].get<std::vector<double>>();
        const auto hi = j["upper"].get<std::vector<double>>();
        if (P == 1) {
          lo1 = lo;
          hi1 = hi;
        }
        double dl = 0, du = 0, scale = 0, sum = 0;
        for (size_t k = 0; k < lo.size() && k < lo1.size(); ++k) {
          dl = std::max(dl, std::abs(lo[k] - lo1[k]));
          du = std::max(du, std::abs(hi[k] - hi1[k]));
          scale = std::max({scale, std::abs(lo1[k]), std::abs(hi1[k])});
          sum += lo[k];
        }
        const double rel = scale > 0 ? std::max(dl, du) / scale : 0;
        const double t = j["time_s"].get<double>();
        const int64_t calls = j["comm"]["calls"].get<int64_t>();
        const double mb = double(j["comm"]["bytes"].get<int64_t>()) / 1e6;
        const double share = t > 0 ? 100 * j["comm"]["time_s"].get<double>() / t : 0;
        std::printf(
            "| %s | %d | %d | %s | %.3g | %.3g | %.2g | %.6g | %.4f | %lld | %.2f | %.1f%% |\n",
            c.name.c_str(), c.zones, P, mode.c_str(), dl, du, rel, sum, t,
            static_cast<long long>(calls), mb, share);
        std::fflush(stdout);
        if (out) {
          out << c.name << ',' << c.zones << ',' << P << ',' << mode << ',' << dl << ',' << du
              << ',' << rel << ',' << sum << ',' << t << ',' << calls << ',' << mb << ',' << share
              << "\n";
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_tp"};
  bool worker = false;
  WorkerArgs w;
  std::string procs = "1,2,4";
  std::string fixtures = DISTCROWN_DEFAULT_FIXTURES;
  std::string csv_wide;
  std::string csv_drift;
  std::string cli = DISTCROWN_CLI_PATH;
  std::string mpirun = DISTCROWN_MPIRUN;
  std::string workdir = "/tmp/distcrown_bench_tp";
  bool skip_wide = false;
  bool skip_drift = false;
  app.add_flag("--worker", worker, "internal: run one wide-MLP configuration (under mpirun)");
  app.add_option("--in", w.in, "wide MLP input features")->capture_default_str();
  app.add_option("--hidden", w.hidden, "wide MLP hidden ReLUs")->capture_default_str();
  app.add_option("--batch", w.batch, "wide MLP input boxes per pass")->capture_default_str();
  app.add_option("--mode", w.mode, "worker: none, tp or tp-exact")->capture_default_str();
  app.add_option("--device", w.device, "cpu or cuda")->capture_default_str();
  app.add_option("--backend", w.backend, "worker communicator: mpi or nccl")->capture_default_str();
  app.add_option("--json", w.json, "worker: result file (rank 0)");
  app.add_option("--procs", procs, "comma-separated world sizes")->capture_default_str();
  app.add_option("--fixtures", fixtures, "VNN-COMP fixtures folder")->capture_default_str();
  app.add_option("--csv-wide", csv_wide, "write the wide-MLP rows as CSV");
  app.add_option("--csv-drift", csv_drift, "write the drift rows as CSV");
  app.add_option("--cli", cli, "distcrown executable")->capture_default_str();
  app.add_option("--mpirun", mpirun, "mpirun executable")->capture_default_str();
  app.add_option("--workdir", workdir, "where models and outputs are written");
  app.add_flag("--skip-wide", skip_wide, "do not run the wide-MLP table");
  app.add_flag("--skip-drift", skip_drift, "do not run the drift table");
  CLI11_PARSE(app, argc, argv);
  if (worker) return run_worker(w);

  ::mkdir(workdir.c_str(), 0755);
  std::vector<int> ps;
  for (const std::string& p : split(procs)) ps.push_back(std::stoi(p));
  const std::string self = "/proc/self/exe";
  char path[4096] = {};
  const ssize_t n = ::readlink(self.c_str(), path, sizeof path - 1);
  const std::string exe = n > 0 ? std::string(path, size_t(n)) : std::string(argv[0]);
  if (!skip_wide) wide_table(exe, mpirun, workdir, ps, w, csv_wide);
  if (!skip_drift) {
    std::vector<Case> cases;
    for (const std::string& d : {std::string("2"), std::string("4"), std::string("6")}) {
      const std::string model = fixtures + "/models/mnist_256x" + d + ".onnx";
      if (!file_exists(model)) continue;
      cases.push_back({"mnist_256x" + d, (std::stoi(d) + 1) / 2, model,
                       fixtures + "/specs/mnist_prop_0_0.03.vnnlib"});
    }
    // The deeper synthetic MLP: 784 -> 256 x 8 -> 10 (4 zones), eps 0.01 around a random image.
    {
      const std::string model = workdir + "/mlp256x8.onnx";
      const std::string prop = workdir + "/mlp256x8.vnnlib";
      std::ofstream(model, std::ios::binary) << distcrown::io::serialize_onnx_model(
          distcrown::io::random_mlp_onnx(784, 256, 8, 10, 3));
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
      const at::Tensor x = at::empty({784}, at::kDouble).uniform_(0, 1, gen);
      std::ofstream(prop) << distcrown::io::box_property(
          std::vector<double>(x.data_ptr<double>(), x.data_ptr<double>() + 784), 0.01, 10);
      cases.push_back({"synthetic 256x8", 4, model, prop});
    }
    // The CLI gets the worker's --backend too: NCCL cannot put two ranks on one GPU, MPI can
    // (host-staged).
    drift_table(cli, mpirun, workdir, ps, cases, w.device, w.backend, csv_drift);
  }
  return 0;
}
