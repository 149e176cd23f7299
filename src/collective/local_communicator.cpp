// Local backend: P = 1. Every collective reduces to a copy or nothing, but the arguments are
// checked exactly as the other backends check them and the stats are counted the same way, so
// code developed at P = 1 behaves identically when sharded.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checks.hpp"
#include "distcrown/collective/communicator.hpp"

namespace distcrown::collective {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  [[nodiscard]] int rank() const override { return 0; }
  [[nodiscard]] int size() const override { return 1; }
  [[nodiscard]] std::string backend() const override { return "local"; }

  void all_reduce(at::Tensor& t, ReduceOp /*op*/) override {
    detail::check_tensor(t, "all_reduce", "t");
    record(std::chrono::steady_clock::now(), static_cast<int64_t>(t.nbytes()));
  }

  void all_gather(const at::Tensor& in, at::Tensor& out) override {
    detail::check_in_out(in, out, "all_gather");
    detail::check_numel_ratio(out, "out", in, "in", 1, "all_gather");
    const auto start = std::chrono::steady_clock::now();
    copy_flat(in, out);
    record(start, static_cast<int64_t>(in.nbytes()));
  }

  void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp /*op*/) override {
    detail::check_in_out(in, out, "reduce_scatter");
    detail::check_numel_ratio(in, "in", out, "out", 1, "reduce_scatter");
    const auto start = std::chrono::steady_clock::now();
    copy_flat(in, out);
    record(start, static_cast<int64_t>(in.nbytes()));
  }

  void broadcast(at::Tensor& t, int root) override {
    detail::check_tensor(t, "broadcast", "t");
    detail::check_root(root, 1, "broadcast");
    record(std::chrono::steady_clock::now(), static_cast<int64_t>(t.nbytes()));
  }

  void barrier() override { record(std::chrono::steady_clock::now(), 0); }

  [[nodiscard]] std::vector<std::string> all_gather_strings(const std::string& s) override {
    record_control(std::chrono::steady_clock::now(), static_cast<int64_t>(s.size()));
    return {s};
  }

  [[nodiscard]] CommPtr split(int /*color*/) override {
    return std::make_shared<LocalCommunicator>();
  }

 private:
  // out and in have the same numel and are contiguous, so a flat view copies in rank-major order
  // whatever their shapes are.
  static void copy_flat(const at::Tensor& in, at::Tensor& out) {
    if (in.numel() == 0 || in.is_same(out)) {
      return;
    }
    out.view({-1}).copy_(in.view({-1}));
  }
};

}  // namespace

CommPtr make_local_communicator() { return std::make_shared<LocalCommunicator>(); }

void Communicator::set_collective_timeout(double seconds) {
  if (!(seconds >= 0.0)) {
    throw InvalidArgument(
        "collective timeout must be 0 (none) or a positive number of seconds, not " +
        std::to_string(seconds));
  }
  collective_timeout_s_ = seconds;
}

// Meant to be asked before MPI is initialized: Open MPI's singleton MPI_Init (a process started
// without mpirun) sets PMIX_RANK in the process environment, after which this returns true.
bool launched_under_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) {
      return true;
    }
  }
  return false;
}

}  // namespace distcrown::collective
