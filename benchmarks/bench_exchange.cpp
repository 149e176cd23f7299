// bench_exchange: the cost of branch and bound's round exchange, a host all-gather of every
// rank's message (Communicator::all_gather_strings, as exchange_reports and move_planned call
// it), at the ranks it is started with. For each message size: the median over --reps calls,
// each after a barrier, of the slowest rank's seconds; then the latency (the smallest message's
// time) and the seconds per byte gathered (P * size; the slope between the two largest sizes)
// that benchmarks/bench_bab_scaling.py takes as the exchange's cost in its model.
//
//   mpirun -np 2 build/bin/bench_exchange [--sizes 64,1024,16384,65536,131072] [--reps 40]
//                                         [--json out.json]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "distcrown/collective/mpi.hpp"

namespace {

using distcrown::collective::Communicator;

// The slowest rank's seconds of one all-gather of `size` bytes from every rank.
double one_exchange(Communicator& comm, const std::string& message) {
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> all = comm.all_gather_strings(message);
  const double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  at::Tensor slowest = at::full({1}, mine, at::kDouble);
  comm.all_reduce(slowest, distcrown::collective::ReduceOp::kMax);
  if (all.size() != size_t(comm.size())) throw std::runtime_error("all-gather lost a message");
  return slowest.item<double>();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_exchange: host all-gather cost at the ranks it runs on"};
  std::vector<int64_t> sizes{64, 1024, 16384, 65536, 131072};
  int reps = 40;
  std::string json_path;
  app.add_option("--sizes", sizes, "bytes of each rank's message")->delimiter(',');
  app.add_option("--reps", reps, "calls per size (after 3 warm-up calls)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "write the table and the fitted line here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  const distcrown::collective::CommPtr comm = distcrown::collective::make_mpi_communicator();
  const int P = comm->size();
  std::vector<double> x;  // bytes gathered by every rank
  std::vector<double> y;  // median seconds
  nlohmann::json rows = nlohmann::json::array();
  if (comm->rank() == 0) std::printf("%6s %12s %14s\n", "ranks", "bytes/rank", "median_us");
  for (const int64_t size : sizes) {
    const std::string message(size_t(size), 'x');
    for (int i = 0; i < 3; ++i) one_exchange(*comm, message);
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) times.push_back(one_exchange(*comm, message));
    const double m = median(times);
    x.push_back(double(P) * double(size));
    y.push_back(m);
    rows.push_back({{"bytes_per_rank", size}, {"median_s", m}});
    if (comm->rank() == 0) std::printf("%6d %12lld %14.1f\n", P, (long long)size, m * 1e6);
  }
  // Latency: the smallest message's time; per byte: the slope between the two largest (where
  // the copies, not the handshakes, take the time).
  const size_t k = x.size();
  const double a = y.front();
  const double b =
      k >= 2 && x[k - 1] > x[k - 2] ? (y[k - 1] - y[k - 2]) / (x[k - 1] - x[k - 2]) : 0;
  if (comm->rank() == 0) {
    std::printf("latency %.1f us; %.3f ns per byte gathered (%.2f GB/s)\n", a * 1e6, b * 1e9,
                b > 0 ? 1e-9 / b : 0.0);
    if (!json_path.empty()) {
      std::ofstream(json_path)
          << nlohmann::json{{"ranks", P}, {"rows", rows}, {"latency_s", a}, {"per_byte_s", b}}.dump(
                 2)
          << "\n";
    }
  }
  comm->barrier();
  return 0;
}
