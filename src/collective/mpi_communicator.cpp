// MPI backend: Open MPI collectives on a duplicate of MPI_COMM_WORLD. CPU tensors go to MPI
// directly; CUDA tensors are staged through host memory with at:: copies (no CUDA headers here).
// Also home of the process-wide MPI environment and of the argument checks all backends share.
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include "collective_watch.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/util/error.hpp"
#include "mpi_environment.hpp"

namespace distcrown::collective {
namespace detail {
namespace {

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(rc);
  }
  return std::string(text, static_cast<size_t>(length));
}

// The process-wide environment: the one piece of global state of this backend. A weak_ptr, so
// the environment lives exactly as long as some communicator holds it.
std::mutex& env_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::weak_ptr<MpiEnvironment>& env_slot() {
  static std::weak_ptr<MpiEnvironment> slot;
  return slot;
}

}  // namespace

std::shared_ptr<MpiEnvironment> MpiEnvironment::acquire() {
  std::lock_guard<std::mutex> lock(env_mutex());
  if (auto env = env_slot().lock()) {
    return env;
  }
  int finalized = 0;
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  if (finalized != 0) {
    throw Error(
        "MPI has already been finalized in this process and cannot be initialized again; keep "
        "one MPI/NCCL communicator alive for as long as distributed work continues");
  }
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  bool owns = false;
  if (initialized == 0) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      throw Error("cannot initialize MPI: MPI_Init_thread failed: " + mpi_error_string(rc));
    }
    owns = true;
  }
  std::shared_ptr<MpiEnvironment> env(new MpiEnvironment(owns));
  env_slot() = env;
  return env;
}

MpiEnvironment::~MpiEnvironment() {
  if (!owns_) {
    return;
  }
  std::lock_guard<std::mutex> lock(env_mutex());
  int finalized = 0;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && finalized == 0) {
    MPI_Finalize();
  }
}

MpiComm::~MpiComm() {
  if (comm_ == MPI_COMM_NULL) {
    return;
  }
  int finalized = 0;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && finalized == 0) {
    MPI_Comm_free(&comm_);
  }
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    throw Error(std::string(what) + " failed: " + mpi_error_string(rc));
  }
}

std::unique_ptr<MpiComm> dup_world() {
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  auto owned = std::make_unique<MpiComm>(comm);
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  return owned;
}

std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& s,
                                            CollectiveWatch& watch, double timeout_s) {
  if (s.size() > static_cast<size_t>(INT_MAX)) {
    throw InvalidArgument("all_gather_strings: string of " + std::to_string(s.size()) +
                          " bytes is larger than MPI's int count limit");
  }
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const int length = static_cast<int>(s.size());
  std::vector<int> lengths(static_cast<size_t>(size), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &request),
            "MPI_Iallgather");
  watch.wait("all_gather_strings", timeout_s, CollectiveWatch::request_done(request));
  std::vector<int> displs(static_cast<size_t>(size), 0);
  int64_t total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    if (total > INT_MAX) {
      break;
    }
    displs[r] = static_cast<int>(total);
    total += lengths[r];
  }
  if (total > INT_MAX) {
    // Every rank sees the same lengths, so every rank throws here: no rank is left waiting.
    throw InvalidArgument("all_gather_strings: " + std::to_string(total) +
                          " bytes in all exceed MPI's int count limit");
  }
  std::vector<char> buffer(static_cast<size_t>(total) + 1, '\0');
  check_mpi(MPI_Iallgatherv(s.data(), length, MPI_CHAR, buffer.data(), lengths.data(),
                            displs.data(), MPI_CHAR, comm, &request),
            "MPI_Iallgatherv");
  watch.wait("all_gather_strings", timeout_s, CollectiveWatch::request_done(request));
  std::vector<std::string> result;
  result.reserve(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    result.emplace_back(buffer.data() + displs[r], static_cast<size_t>(lengths[r]));
  }
  return result;
}

}  // namespace detail

namespace {

using detail::check_mpi;

MPI_Datatype mpi_type(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kFloat:
      return MPI_FLOAT;
    case at::kDouble:
      return MPI_DOUBLE;
    case at::kInt:
      return MPI_INT32_T;
    case at::kLong:
      return MPI_INT64_T;
    case at::kByte:
    case at::kBool:  // one byte, 0 or 1
      return MPI_UINT8_T;
    default:
      throw InvalidArgument(std::string(op) + ": the MPI communicator does not support dtype " +
                            c10::toString(type) +
                            " (supported: float, double, int32, int64, uint8, bool)");
  }
}

MPI_Op mpi_op(ReduceOp op, at::ScalarType type) {
  switch (op) {
    case ReduceOp::kSum:
      // A sum of bools is their logical OR (max keeps the values 0/1, as c10d does).
      return type == at::kBool ? MPI_MAX : MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  throw InvalidArgument("unknown ReduceOp");
}

int mpi_count(int64_t numel, const char* op) {
  if (numel > INT_MAX) {
    throw InvalidArgument(std::string(op) + ": " + std::to_string(numel) +
                          " elements exceed MPI's int count limit");
  }
  return static_cast<int>(numel);
}

void check_device(const at::Tensor& t, const char* op) {
  if (!t.is_cpu() && !t.is_cuda()) {
    throw InvalidArgument(std::string(op) +
                          ": the MPI communicator takes CPU or CUDA tensors, not " +
                          t.device().str());
  }
}

// True when the byte ranges of two CPU tensors overlap (MPI forbids aliased send/receive buffers).
bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) {
    return false;
  }
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

at::Tensor empty_on_host_like(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options().device(at::kCPU));
}

class MpiCommunicator final : public Communicator {
 public:
  // Members initialise in declaration order: MPI is up (env_) before the world is duplicated.
  MpiCommunicator()
      : env_(detail::MpiEnvironment::acquire()),
        comm_(detail::dup_world()),
        watch_(comm_->get(), "mpi") {
    check_mpi(MPI_Comm_rank(comm_->get(), &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_->get(), &size_), "MPI_Comm_size");
  }

  // A part of an existing communicator (split), sharing its environment.
  MpiCommunicator(std::shared_ptr<detail::MpiEnvironment> env,
                  std::unique_ptr<detail::MpiComm> comm, double collective_timeout_s)
      : env_(std::move(env)), comm_(std::move(comm)), watch_(comm_->get(), "mpi") {
    collective_timeout_s_ = collective_timeout_s;
    check_mpi(MPI_Comm_rank(comm_->get(), &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_->get(), &size_), "MPI_Comm_size");
  }

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] std::string backend() const override { return "mpi"; }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    constexpr const char* kOp = "all_reduce";
    detail::check_tensor(t, kOp, "t");
    check_device(t, kOp);
    const MPI_Datatype type = mpi_type(t.scalar_type(), kOp);
    const MPI_Op mop = mpi_op(op, t.scalar_type());
    const int count = mpi_count(t.numel(), kOp);
    const auto start = std::chrono::steady_clock::now();
    at::Tensor buf = t.is_cpu() ? t : t.cpu();
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(
        MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), count, type, mop, comm_->get(), &request),
        "MPI_Iallreduce");
    wait(kOp, request);
    if (!t.is_cpu()) {
      t.copy_(buf);
    }
    record(start, static_cast<int64_t>(t.nbytes()));
  }

  void all_gather(const at::Tensor& in, at::Tensor& out) override {
    constexpr const char* kOp = "all_gather";
    detail::check_in_out(in, out, kOp);
    check_device(in, kOp);
    detail::check_numel_ratio(out, "out", in, "in", size_, kOp);
    const MPI_Datatype type = mpi_type(in.scalar_type(), kOp);
    const int count = mpi_count(in.numel(), kOp);
    mpi_count(out.numel(), kOp);
    const auto start = std::chrono::steady_clock::now();
    if (in.is_cpu()) {
      const at::Tensor send = overlaps(in, out) ? in.clone() : in;
      gather(send, out, count, type);
    } else {
      const at::Tensor send = in.cpu();
      at::Tensor recv = empty_on_host_like(out);
      gather(send, recv, count, type);
      out.copy_(recv);
    }
    record(start, static_cast<int64_t>(in.nbytes()));
  }

  void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) override {
    constexpr const char* kOp = "reduce_scatter";
    detail::check_in_out(in, out, kOp);
    check_device(in, kOp);
    detail::check_numel_ratio(in, "in", out, "out", size_, kOp);
    const MPI_Datatype type = mpi_type(in.scalar_type(), kOp);
    const MPI_Op mop = mpi_op(op, in.scalar_type());
    const int count = mpi_count(out.numel(), kOp);
    mpi_count(in.numel(), kOp);
    const auto start = std::chrono::steady_clock::now();
    if (in.is_cpu()) {
      const at::Tensor send = overlaps(in, out) ? in.clone() : in;
      scatter(send, out, count, type, mop);
    } else {
      const at::Tensor send = in.cpu();
      at::Tensor recv = empty_on_host_like(out);
      scatter(send, recv, count, type, mop);
      out.copy_(recv);
    }
    record(start, static_cast<int64_t>(in.nbytes()));
  }

  void broadcast(at::Tensor& t, int root) override {
    constexpr const char* kOp = "broadcast";
    detail::check_tensor(t, kOp, "t");
    check_device(t, kOp);
    detail::check_root(root, size_, kOp);
    const MPI_Datatype type = mpi_type(t.scalar_type(), kOp);
    const int count = mpi_count(t.numel(), kOp);
    const auto start = std::chrono::steady_clock::now();
    at::Tensor buf = t.is_cpu() ? t : (rank_ == root ? t.cpu() : empty_on_host_like(t));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(buf.data_ptr(), count, type, root, comm_->get(), &request), "MPI_Ibcast");
    wait(kOp, request);
    if (!t.is_cpu()) {
      t.copy_(buf);
    }
    // Only the root sends the payload.
    record(start, rank_ == root ? static_cast<int64_t>(t.nbytes()) : 0);
  }

  void barrier() override {
    const auto start = std::chrono::steady_clock::now();
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_->get(), &request), "MPI_Ibarrier");
    wait("barrier", request);
    record(start, 0);
  }

  [[nodiscard]] std::vector<std::string> all_gather_strings(const std::string& s) override {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> all =
        detail::all_gather_strings(comm_->get(), s, watch_, collective_timeout_s_);
    record_control(start, static_cast<int64_t>(s.size()));
    return all;
  }

  [[nodiscard]] CommPtr split(int color) override {
    MPI_Comm part = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_->get(), color, rank_, &part), "MPI_Comm_split");
    auto owned = std::make_unique<detail::MpiComm>(part);
    check_mpi(MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return std::make_shared<MpiCommunicator>(env_, std::move(owned), collective_timeout_s_);
  }

 private:
  // The nonblocking collective `request` (MPI_I*), waited for under the watchdog.
  void wait(const char* op, MPI_Request& request) {
    watch_.wait(op, collective_timeout_s_, detail::CollectiveWatch::request_done(request));
  }

  void gather(const at::Tensor& send, at::Tensor& recv, int count, MPI_Datatype type) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(send.data_ptr(), count, type, recv.data_ptr(), count, type,
                             comm_->get(), &request),
              "MPI_Iallgather");
    wait("all_gather", request);
  }

  void scatter(const at::Tensor& send, at::Tensor& recv, int count, MPI_Datatype type, MPI_Op op) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ireduce_scatter_block(send.data_ptr(), recv.data_ptr(), count, type, op,
                                        comm_->get(), &request),
              "MPI_Ireduce_scatter_block");
    wait("reduce_scatter", request);
  }

  // Declaration order = construction order; destruction frees the communicator before the
  // environment can finalize MPI.
  std::shared_ptr<detail::MpiEnvironment> env_;
  std::unique_ptr<detail::MpiComm> comm_;
  detail::CollectiveWatch watch_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

CommPtr make_mpi_communicator() { return std::make_shared<MpiCommunicator>(); }

void abort_all_ranks(int code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace distcrown::collective
