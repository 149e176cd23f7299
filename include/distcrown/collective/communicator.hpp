#pragma once
// Communicator: the small collective interface every distributed piece uses (c10d style: an
// abstract interface, backends behind it). Backends:
//   Local  P = 1, no MPI needed at runtime
//   MPI    Open MPI; CPU tensors directly, CUDA tensors staged through host memory
//   NCCL   CUDA tensors on the current LibTorch stream; unique id broadcast over MPI; one GPU
//          per rank, chosen from the local rank
// The MPI and NCCL backends live in the separate library distcrown_mpi (collective/mpi.hpp), so a
// single-process program links no MPI.
// All calls are collective and blocking: every rank must make the same calls in the same order.
// Tensors must be contiguous; results are written in place or into `out`.
// A collective that waits longer than the communicator's collective timeout throws
// CollectiveTimeout naming the ranks that did not arrive (MPI and NCCL; see collective_timeout).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/util/error.hpp"

namespace distcrown::collective {

enum class ReduceOp { kSum, kMax, kMin };

/// A collective did not complete within the communicator's collective timeout. The message
/// names the collective, the ranks that did not arrive and where the others wait. The
/// communicator cannot be used again (its collective is still pending): end the job (an
/// executable: abort_all_ranks in collective/mpi.hpp).
class CollectiveTimeout : public Error {
 public:
  using Error::Error;
};

/// Long enough that no healthy run waits so long in one collective (every rank reaches each
/// exchange within one round or pass of its own), short enough to end a job that a lost rank
/// or host would otherwise hang (c10d's Gloo default).
inline constexpr double kDefaultCollectiveTimeoutSeconds = 1800.0;

/// Counters of the collectives one communicator made (for the memory/comm report): the tensor
/// collectives, and apart from them the host-side control messages (all_gather_strings).
struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;    // payload bytes this rank sent into collectives
  double time_s = 0.0;  // wall time spent inside collectives
  int64_t control_calls = 0;
  int64_t control_bytes = 0;    // bytes of this rank's own strings
  double control_time_s = 0.0;  // waiting for the other ranks included
  /// The counts of `*this` since `earlier` (a snapshot of the same communicator).
  [[nodiscard]] CommStats since(const CommStats& earlier) const {
    return {calls - earlier.calls,
            bytes - earlier.bytes,
            time_s - earlier.time_s,
            control_calls - earlier.control_calls,
            control_bytes - earlier.control_bytes,
            control_time_s - earlier.control_time_s};
  }
  CommStats& operator+=(const CommStats& o) {
    calls += o.calls;
    bytes += o.bytes;
    time_s += o.time_s;
    control_calls += o.control_calls;
    control_bytes += o.control_bytes;
    control_time_s += o.control_time_s;
    return *this;
  }
};

class Communicator {
 public:
  Communicator() = default;
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual std::string backend() const = 0;  // "local", "mpi", "nccl"

  /// t = op over ranks of t (elementwise), in place.
  virtual void all_reduce(at::Tensor& t, ReduceOp op) = 0;
  /// out = concat over ranks (rank-major) of each rank's `in`; every rank's `in` has the same
  /// numel; out is contiguous with numel = size() * in.numel() (any shape), same dtype/device.
  virtual void all_gather(const at::Tensor& in, at::Tensor& out) = 0;
  /// out = this rank's block of op over ranks of `in`; in.numel() = size() * out.numel().
  virtual void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) = 0;
  /// t = root's t, in place.
  virtual void broadcast(at::Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  /// Host-side control message: every rank's string, in rank order (counted in stats' control_*).
  [[nodiscard]] virtual std::vector<std::string> all_gather_strings(const std::string& s) = 0;
  /// Collective: the ranks that pass the same `color` form a new communicator of the same
  /// backend, ranked in this one's order (MPI_Comm_split). The branch and bound's domain groups.
  [[nodiscard]] virtual std::shared_ptr<Communicator> split(int color) = 0;

  [[nodiscard]] const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  /// How long one collective may wait for the other ranks before it throws CollectiveTimeout;
  /// 0 waits forever. Every rank should set the same. split() hands it to the parts. The Local
  /// backend never waits.
  void set_collective_timeout(double seconds);
  [[nodiscard]] double collective_timeout() const { return collective_timeout_s_; }

 protected:
  /// Counts one tensor collective, or one control message, of `bytes` that started at `start`
  /// (every backend's calls end with one of these).
  void record(std::chrono::steady_clock::time_point start, int64_t bytes) {
    stats_.time_s += seconds_since(start);
    stats_.calls += 1;
    stats_.bytes += bytes;
  }
  void record_control(std::chrono::steady_clock::time_point start, int64_t bytes) {
    stats_.control_time_s += seconds_since(start);
    stats_.control_calls += 1;
    stats_.control_bytes += bytes;
  }

  CommStats stats_;
  double collective_timeout_s_ = kDefaultCollectiveTimeoutSeconds;

 private:
  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

using CommPtr = std::shared_ptr<Communicator>;

/// P = 1, no MPI.
CommPtr make_local_communicator();

/// True when this process was started by mpirun/mpiexec (Open MPI, MPICH or PMI environment).
bool launched_under_mpi();

}  // namespace distcrown::collective
