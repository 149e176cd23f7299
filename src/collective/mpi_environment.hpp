#pragma once
// Private to src/collective: the process-wide MPI environment shared by the MPI and NCCL
// communicators. Not installed, not public.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include "checks.hpp"

namespace distcrown::collective::detail {

/// MPI for this process. acquire() initializes MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) when
/// nobody has yet; every communicator holds the returned shared_ptr, and when the last holder lets
/// go, MPI_Finalize runs -- only if this object was the one that initialized MPI. MPI cannot be
/// initialized twice in one process, so acquire() after such a finalize throws distcrown::Error.
class MpiEnvironment {
 public:
  [[nodiscard]] static std::shared_ptr<MpiEnvironment> acquire();

  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  /// True when acquire() called MPI_Init_thread (and this object will call MPI_Finalize).
  [[nodiscard]] bool owns_mpi() const { return owns_; }

 private:
  explicit MpiEnvironment(bool owns) : owns_(owns) {}
  bool owns_;
};

/// Owns one communicator handle (MPI_Comm_free on destruction, skipped after MPI_Finalize).
class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {}
  ~MpiComm();
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  [[nodiscard]] MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// Throws distcrown::Error("MPI <what> failed: <MPI_Error_string>") unless rc == MPI_SUCCESS.
void check_mpi(int rc, const char* what);

/// MPI_Comm_dup(MPI_COMM_WORLD) with MPI_ERRORS_RETURN set on the duplicate.
[[nodiscard]] std::unique_ptr<MpiComm> dup_world();

class CollectiveWatch;

/// Every rank's string, in rank order: an all-gather of the lengths, then of the strings, each
/// waited for under `watch` with `timeout_s` (collective_watch.hpp).
[[nodiscard]] std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& s,
                                                          CollectiveWatch& watch, double timeout_s);

}  // namespace distcrown::collective::detail
