// NCCL backend: CUDA tensors, collectives on LibTorch's current stream of this rank's device, one
// GPU per rank. MPI bootstraps it (the unique id is broadcast from rank 0) and carries the
// host-side control messages. Every call waits for the stream before returning, so the
// blocking contract of Communicator holds; the wait polls under the watchdog (collective_watch.hpp)
// and aborts the NCCL communicator (ncclCommAbort) when the collective timeout passes.
//
// Compiled into the library always; without DISTCROWN_HAVE_NCCL only the fallback at the bottom is.
#include <memory>
#include <string>
#include <vector>

#include "distcrown/collective/mpi.hpp"
#include "distcrown/util/error.hpp"

#ifdef DISTCROWN_HAVE_NCCL

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "collective_watch.hpp"
#include "mpi_environment.hpp"

namespace distcrown::collective {
namespace {

using detail::check_mpi;

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky error so LibTorch does not report it later
    throw Error(std::string(what) + " failed: " + cudaGetErrorString(rc) + " (CUDA error " +
                std::to_string(static_cast<int>(rc)) + ")");
  }
}

void check_nccl(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
  if (rc != ncclSuccess) {
    std::string message = std::string(what) + " failed: " + ncclGetErrorString(rc);
    const char* last = comm != nullptr ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
    if (last != nullptr && *last != '\0') {
      message += std::string(" (") + last + ")";
    }
    throw Error(message);
  }
}

ncclDataType_t nccl_type(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
    case at::kBool:  // one byte, 0 or 1
      return ncclUint8;
    default:
      throw InvalidArgument(std::string(op) + ": the NCCL communicator does not support dtype " +
                            c10::toString(type));
  }
}

ncclRedOp_t nccl_op(ReduceOp op, at::ScalarType type) {
  switch (op) {
    case ReduceOp::kSum:
      // A sum of bools is their logical OR (max keeps the values 0/1, as c10d does).
      return type == at::kBool ? ncclMax : ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  throw InvalidArgument("unknown ReduceOp");
}

// Rank among the processes on this node: Open MPI tells us; otherwise ask MPI for a shared-memory
// split of the communicator.
int local_rank(MPI_Comm comm, int rank) {
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"); env != nullptr) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value >= 0) {
      return static_cast<int>(value);
    }
  }
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return rank;
  }
  int node_rank = rank;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  return node_rank;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator()
      : env_(detail::MpiEnvironment::acquire()),
        mpi_(detail::dup_world()),
        watch_(mpi_->get(), "nccl") {
    MPI_Comm comm = mpi_->get();
    check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    const int local = local_rank(comm, rank_);  // collective when the environment does not say

    // 1. Every rank picks its device; all ranks agree before anyone enters NCCL, so a rank
    //    without a GPU makes every rank throw instead of leaving the others waiting.
    std::string problem;
    int device_count = 0;
    if (const cudaError_t rc = cudaGetDeviceCount(&device_count); rc != cudaSuccess) {
      cudaGetLastError();
      problem =
          std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(rc) + ")";
    } else if (device_count < 1) {
      problem = "no CUDA device";
    } else {
      device_ = local % device_count;
      if (const cudaError_t rc = cudaSetDevice(device_); rc != cudaSuccess) {
        cudaGetLastError();
        problem =
            "cudaSetDevice(" + std::to_string(device_) + ") failed: " + cudaGetErrorString(rc);
      }
    }
    int ok = problem.empty() ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
    if (ok == 0) {
      throw Error("cannot create the NCCL communicator: " +
                  (problem.empty() ? std::string("another rank has no usable CUDA device")
                                   : "rank " + std::to_string(rank_) + ": " + problem));
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_));

    // 2. NCCL refuses two ranks on one GPU; say so clearly (same verdict on every rank).
    char bus_id[64] = {};
    check_cuda(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device_), "cudaDeviceGetPCIBusId");
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int host_length = 0;
    check_mpi(MPI_Get_processor_name(host, &host_length), "MPI_Get_processor_name");
    const auto places = detail::all_gather_strings(
        comm, std::string(host, static_cast<size_t>(host_length)) + " GPU " + bus_id, watch_,
        collective_timeout_s_);
    if (std::set<std::string>(places.begin(), places.end()).size() != places.size()) {
      throw Error("cannot create the NCCL communicator: NCCL needs one GPU per rank, but " +
                  std::to_string(size_) + " ranks share fewer GPUs (rank " + std::to_string(rank_) +
                  " is on " + places[static_cast<size_t>(rank_)] +
                  "); start at most as many ranks per node as there are GPUs");
    }

    // 3. Bootstrap NCCL.
    ncclUniqueId id{};
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    }
    check_mpi(MPI_Bcast(&id, static_cast<int>(sizeof(id)), MPI_BYTE, 0, comm), "MPI_Bcast");
    check_nccl(ncclCommInitRank(&nccl_, size_, id, rank_), "ncclCommInitRank");
  }

  ~NcclCommunicator() override {
    if (nccl_ != nullptr) {
      ncclCommDestroy(nccl_);
    }
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] std::string backend() const override { return "nccl"; }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    constexpr const char* kOp = "all_reduce";
    detail::check_tensor(t, kOp, "t");
    check_device(t, kOp, "t");
    const ncclDataType_t type = nccl_type(t.scalar_type(), kOp);
    const ncclRedOp_t nop = nccl_op(op, t.scalar_type());
    const auto start = std::chrono::steady_clock::now();
    const cudaStream_t stream = current_stream();
    if (t.numel() > 0) {  // an empty tensor has no buffer to hand to NCCL
      check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type,
                               nop, nccl_, stream),
                 "ncclAllReduce", nccl_);
    }
    finish(kOp, stream, start, static_cast<int64_t>(t.nbytes()));
  }

  void all_gather(const at::Tensor& in, at::Tensor& out) override {
    constexpr const char* kOp = "all_gather";
    detail::check_in_out(in, out, kOp);
    check_device(in, kOp, "in");
    detail::check_numel_ratio(out, "out", in, "in", size_, kOp);
    const ncclDataType_t type = nccl_type(in.scalar_type(), kOp);
    const auto start = std::chrono::steady_clock::now();
    const cudaStream_t stream = current_stream();
    if (in.numel() > 0) {
      check_nccl(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), type,
                               nccl_, stream),
                 "ncclAllGather", nccl_);
    }
    finish(kOp, stream, start, static_cast<int64_t>(in.nbytes()));
  }

  void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) override {
    constexpr const char* kOp = "reduce_scatter";
    detail::check_in_out(in, out, kOp);
    check_device(in, kOp, "in");
    detail::check_numel_ratio(in, "in", out, "out", size_, kOp);
    const ncclDataType_t type = nccl_type(in.scalar_type(), kOp);
    const ncclRedOp_t nop = nccl_op(op, in.scalar_type());
    const auto start = std::chrono::steady_clock::now();
    const cudaStream_t stream = current_stream();
    if (out.numel() > 0) {
      check_nccl(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                   type, nop, nccl_, stream),
                 "ncclReduceScatter", nccl_);
    }
    finish(kOp, stream, start, static_cast<int64_t>(in.nbytes()));
  }

  void broadcast(at::Tensor& t, int root) override {
    constexpr const char* kOp = "broadcast";
    detail::check_tensor(t, kOp, "t");
    check_device(t, kOp, "t");
    detail::check_root(root, size_, kOp);
    const ncclDataType_t type = nccl_type(t.scalar_type(), kOp);
    const auto start = std::chrono::steady_clock::now();
    const cudaStream_t stream = current_stream();
    if (t.numel() > 0) {
      check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type,
                               root, nccl_, stream),
                 "ncclBroadcast", nccl_);
    }
    // Only the root sends the payload.
    finish(kOp, stream, start, rank_ == root ? static_cast<int64_t>(t.nbytes()) : 0);
  }

  void barrier() override {
    // Collectives are already complete when they return; drain whatever else the caller queued
    // on the stream, then meet on the host.
    const auto start = std::chrono::steady_clock::now();
    check_cuda(cudaStreamSynchronize(current_stream()), "cudaStreamSynchronize");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(mpi_->get(), &request), "MPI_Ibarrier");
    watch_.wait("barrier", collective_timeout_s_, detail::CollectiveWatch::request_done(request));
    record(start, 0);
  }

  [[nodiscard]] std::vector<std::string> all_gather_strings(const std::string& s) override {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> all =
        detail::all_gather_strings(mpi_->get(), s, watch_, collective_timeout_s_);
    record_control(start, static_cast<int64_t>(s.size()));
    return all;
  }

  [[nodiscard]] CommPtr split(int /*color*/) override {
    // ncclCommSplit would do it; not built yet, and refused rather than run unsplit.
    throw UnsupportedError(
        "splitting an NCCL communicator (domain groups of more than one rank on GPUs) is not "
        "supported yet; use --backend mpi or one rank per group");
  }

 private:
  void check_device(const at::Tensor& t, const char* op, const char* name) const {
    if (!t.is_cuda()) {
      throw InvalidArgument(std::string(op) + ": the NCCL communicator takes CUDA tensors; `" +
                            name + "` is on " + t.device().str());
    }
    if (t.get_device() != device_) {
      throw InvalidArgument(std::string(op) + ": `" + name + "` is on " + t.device().str() +
                            " but this rank's NCCL device is cuda:" + std::to_string(device_));
    }
  }

  [[nodiscard]] cudaStream_t current_stream() const {
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  }

  // Waits for the collective `op` just queued on `stream`: polls the stream under the watchdog;
  // past the timeout the NCCL communicator is aborted, which ends the kernel that waits.
  void finish(const char* op, cudaStream_t stream, std::chrono::steady_clock::time_point start,
              int64_t bytes) {
    const auto done = [stream] {
      const cudaError_t rc = cudaStreamQuery(stream);
      if (rc == cudaErrorNotReady) return false;
      check_cuda(rc, "cudaStreamQuery");
      return true;
    };
    const auto abort = [this] {
      ncclCommAbort(nccl_);
      nccl_ = nullptr;
    };
    watch_.wait(op, collective_timeout_s_, done, abort);
    record(start, bytes);
  }

  // Declaration order = construction order; ~NcclCommunicator destroys the NCCL communicator,
  // then the MPI communicator is freed, then the environment may finalize MPI.
  std::shared_ptr<detail::MpiEnvironment> env_;
  std::unique_ptr<detail::MpiComm> mpi_;
  detail::CollectiveWatch watch_;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
};

}  // namespace

CommPtr make_nccl_communicator() { return std::make_shared<NcclCommunicator>(); }

bool nccl_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no GPU: "not available", never an error
    return false;
  }
  return count >= 1;
}

}  // namespace distcrown::collective

#else  // !DISTCROWN_HAVE_NCCL

namespace distcrown::collective {

CommPtr make_nccl_communicator() {
  throw Error(
      "built without NCCL: reconfigure with NCCL and the CUDA toolkit installed "
      "(-DDISTCROWN_WITH_NCCL=ON)");
}

bool nccl_available() { return false; }

}  // namespace distcrown::collective

#endif  // DISTCROWN_HAVE_NCCL
