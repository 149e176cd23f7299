// Semantics of the Communicator backends through the public interface. Runs under mpirun at
// 1, 2 and 4 ranks and once without mpirun (tests/CMakeLists.txt). Every rank makes the same
// collective calls in the same order; results are checked with EXPECT_* after the calls, so a
// failing check never leaves another rank waiting in a collective.
//
// Backends: "local" (always), "mpi" (CPU tensors), "mpi_cuda" (CUDA tensors staged through host
// memory; skipped without a GPU), "nccl" (skipped unless nccl_available() and one GPU per rank).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/util/error.hpp"
#include "mpi_test_main.hpp"

namespace {

using distcrown::collective::CommPtr;
using distcrown::collective::ReduceOp;

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Ranks on this node (collective over MPI_COMM_WORLD).
int node_size() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int size = 1;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

bool cuda_usable() { return at::hasCUDA() && at::getNumGPUs() > 0; }

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << t.cpu();
  return out.str();
}

// A per-rank CPU tensor: one function of the rank, so the expected result can be built locally.
using RankTensor = std::function<at::Tensor(int rank)>;

class CommunicatorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& backend = GetParam();
    if (backend == "local") {
      comm_ = distcrown::collective::make_local_communicator();
    } else if (backend == "mpi") {
      comm_ = distcrown::collective::make_mpi_communicator();
    } else if (backend == "mpi_cuda") {
      if (!cuda_usable()) {
        GTEST_SKIP() << "MPI with CUDA tensors needs a CUDA device (none usable here)";
      }
      comm_ = distcrown::collective::make_mpi_communicator();
      device_ = at::kCUDA;
    } else if (backend == "nccl") {
      if (!distcrown::collective::nccl_available()) {
        GTEST_SKIP() << "NCCL backend unavailable: built without NCCL or no CUDA device";
      }
      const int ranks_here = node_size();
      if (static_cast<size_t>(ranks_here) > at::getNumGPUs()) {
        GTEST_SKIP() << "NCCL needs one GPU per rank: " << ranks_here << " ranks on this node, "
                     << at::getNumGPUs() << " GPU(s)";
      }
      comm_ = distcrown::collective::make_nccl_communicator();
      device_ = at::kCUDA;
    } else {
      FAIL() << "unknown backend " << backend;
    }
    size_ = comm_->size();
    rank_ = comm_->rank();
  }

  [[nodiscard]] bool is_local() const { return GetParam() == "local"; }

  // This rank's input, on the backend's device.
  [[nodiscard]] at::Tensor input(const RankTensor& f) const { return f(rank_).to(device_); }

  [[nodiscard]] at::Tensor empty(at::IntArrayRef sizes, at::ScalarType dtype) const {
    return at::empty(sizes, at::TensorOptions().dtype(dtype).device(device_));
  }

  // Elementwise reduction over the ranks of f(rank), on the CPU.
  [[nodiscard]] at::Tensor reduced(const RankTensor& f, ReduceOp op) const {
    std::vector<at::Tensor> all;
    for (int r = 0; r < size_; ++r) {
      all.push_back(f(r));  // NOLINT(performance-inefficient-vector-operation)
    }
    const at::Tensor stacked = at::stack(all);
    switch (op) {
      case ReduceOp::kSum:
        return stacked.sum(0, /*keepdim=*/false, stacked.scalar_type());
      case ReduceOp::kMax:
        return std::get<0>(stacked.max(0));
      case ReduceOp::kMin:
        return std::get<0>(stacked.min(0));
    }
    return {};
  }

  [[nodiscard]] at::Tensor gathered(const RankTensor& f) const {
    std::vector<at::Tensor> all;
    for (int r = 0; r < size_; ++r) {
      all.push_back(f(r).reshape({-1}));  // NOLINT(performance-inefficient-vector-operation)
    }
    return at::cat(all);
  }

  CommPtr comm_;
  at::DeviceType device_ = at::kCPU;
  int size_ = 1;
  int rank_ = 0;
};

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kLong, at::kInt};

#define EXPECT_TENSOR_EQ(actual, expected)                                                  \
  EXPECT_TRUE(at::equal((actual).cpu(), (expected))) << "actual:\n"                         \
                                                     << describe(actual) << "\nexpected:\n" \
                                                     << describe(expected)

TEST_P(CommunicatorTest, Identity) {
  EXPECT_EQ(comm_->backend(), GetParam() == "mpi_cuda" ? "mpi" : GetParam());
  if (is_local()) {
    EXPECT_EQ(size_, 1);
    EXPECT_EQ(rank_, 0);
  } else {
    EXPECT_EQ(size_, world_size());
    EXPECT_EQ(rank_, world_rank());
  }
}

TEST_P(CommunicatorTest, AllReduceSumMaxMin) {
  for (const at::ScalarType dtype : kDtypes) {
    // Values with a different maximizer/minimizer per element, some negative.
    const RankTensor f = [dtype](int r) {
      return (at::arange(6, at::kLong).view({2, 3}) * (r + 1) - 3 * r).to(dtype);
    };
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      at::Tensor t = input(f);
      comm_->all_reduce(t, op);
      EXPECT_TENSOR_EQ(t, reduced(f, op)) << " dtype " << dtype << " op " << static_cast<int>(op);
      EXPECT_EQ(t.scalar_type(), dtype);
      EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 3}));
    }
  }
}

TEST_P(CommunicatorTest, AllReduceBoolSumIsLogicalOr) {
  const RankTensor f = [](int r) {
    return at::tensor(std::vector<int64_t>{r == 0 ? 1 : 0, 0, 1}, at::kLong).to(at::kBool);
  };
  at::Tensor t = input(f);
  comm_->all_reduce(t, ReduceOp::kSum);
  EXPECT_TENSOR_EQ(t, f(0));
}

TEST_P(CommunicatorTest, AllReduceLargeAndEmpty) {
  const RankTensor big = [](int r) { return at::full({1 << 20}, r + 1.0, at::kFloat); };
  at::Tensor t = input(big);
  comm_->all_reduce(t, ReduceOp::kSum);
  EXPECT_TENSOR_EQ(t, at::full({1 << 20}, size_ * (size_ + 1) / 2.0, at::kFloat));

  at::Tensor nothing = empty({0}, at::kFloat);
  comm_->all_reduce(nothing, ReduceOp::kSum);
  EXPECT_EQ(nothing.numel(), 0);
}

TEST_P(CommunicatorTest, AllGather1D) {
  for (const at::ScalarType dtype : kDtypes) {
    const RankTensor f = [dtype](int r) { return (at::arange(3, at::kLong) * 10 + r).to(dtype); };
    const at::Tensor in = input(f);
    at::Tensor out = empty({int64_t{size_} * 3}, dtype);
    comm_->all_gather(in, out);
    EXPECT_TENSOR_EQ(out, gathered(f)) << " dtype " << dtype;
  }
}

TEST_P(CommunicatorTest, AllGather2DRankMajor) {
  const RankTensor f = [](int r) { return at::arange(6, at::kDouble).view({2, 3}) + 100.0 * r; };
  const at::Tensor in = input(f);
  // out stacked along dim 0: rank r's block is rows 2r, 2r+1.
  at::Tensor rows = empty({int64_t{size_} * 2, 3}, at::kDouble);
  comm_->all_gather(in, rows);
  EXPECT_TENSOR_EQ(rows, gathered(f).view({int64_t{size_} * 2, 3}));
  // Any shape with the right numel: rank-major in flattened order.
  at::Tensor per_rank = empty({size_, 6}, at::kDouble);
  comm_->all_gather(in, per_rank);
  EXPECT_TENSOR_EQ(per_rank, gathered(f).view({size_, 6}));
  for (int r = 0; r < size_; ++r) {
    EXPECT_TENSOR_EQ(per_rank[r], f(r).reshape({-1})) << " block of rank " << r;
  }
}

TEST_P(CommunicatorTest, AllGatherInPlace) {
  // `in` is this rank's block of `out` (the in-place form NCCL and MPI both allow).
  const RankTensor f = [](int r) { return at::arange(4, at::kFloat) - 7.0 * r; };
  at::Tensor out = empty({int64_t{size_} * 4}, at::kFloat).fill_(-1.0);
  at::Tensor block = out.narrow(0, static_cast<int64_t>(rank_) * 4, 4);
  block.copy_(f(rank_));
  comm_->all_gather(block, out);
  EXPECT_TENSOR_EQ(out, gathered(f));
}

TEST_P(CommunicatorTest, ReduceScatter) {
  for (const at::ScalarType dtype : kDtypes) {
    const RankTensor f = [this, dtype](int r) {
      return (at::arange(size_ * 4, at::kLong).view({size_, 4}) * (r % 3 + 1) - r).to(dtype);
    };
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      const at::Tensor in = input(f);
      at::Tensor out = empty({4}, dtype);
      comm_->reduce_scatter(in, out, op);
      EXPECT_TENSOR_EQ(out, reduced(f, op)[rank_])
          << " dtype " << dtype << " op " << static_cast<int>(op);
    }
  }
  // 2-D out: in.numel() = size() * out.numel().
  const RankTensor g = [this](int r) {
    return at::arange(size_ * 6, at::kFloat).view({size_, 2, 3}) + r;
  };
  at::Tensor out = empty({2, 3}, at::kFloat);
  comm_->reduce_scatter(input(g), out, ReduceOp::kSum);
  EXPECT_TENSOR_EQ(out, reduced(g, ReduceOp::kSum)[rank_]);
}

TEST_P(CommunicatorTest, BroadcastFromNonZeroRoot) {
  for (const int root : {size_ - 1, size_ / 2}) {
    for (const at::ScalarType dtype : kDtypes) {
      const RankTensor f = [dtype](int r) {
        return (at::arange(5, at::kLong) * (r + 2) + 7 * r).to(dtype);
      };
      at::Tensor t = input(f);
      comm_->broadcast(t, root);
      EXPECT_TENSOR_EQ(t, f(root)) << " root " << root << " dtype " << dtype;
    }
  }
}

TEST_P(CommunicatorTest, Barrier) {
  comm_->reset_stats();
  comm_->barrier();
  comm_->barrier();
  EXPECT_EQ(comm_->stats().calls, 2);
  EXPECT_EQ(comm_->stats().bytes, 0);
}

TEST_P(CommunicatorTest, AllGatherStrings) {
  comm_->reset_stats();
  // Different lengths, rank 0's empty, and a byte that is not text.
  std::string mine(static_cast<size_t>(rank_) * 5, static_cast<char>('a' + rank_ % 26));
  if (rank_ % 2 == 1) {
    mine += '\0';
    mine += "tail";
  }
  const std::vector<std::string> all = comm_->all_gather_strings(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    std::string expected(static_cast<size_t>(r) * 5, static_cast<char>('a' + r % 26));
    if (r % 2 == 1) {
      expected += '\0';
      expected += "tail";
    }
    EXPECT_EQ(all[static_cast<size_t>(r)], is_local() ? mine : expected) << " rank " << r;
  }
  EXPECT_EQ(comm_->stats().calls, 0) << "all_gather_strings is not counted";
}

TEST_P(CommunicatorTest, StatsCounted) {
  comm_->reset_stats();
  EXPECT_EQ(comm_->stats().calls, 0);
  EXPECT_EQ(comm_->stats().bytes, 0);
  EXPECT_EQ(comm_->stats().time_s, 0.0);

  at::Tensor a = empty({10}, at::kFloat).fill_(1.0);
  comm_->all_reduce(a, ReduceOp::kSum);  // 40 bytes
  at::Tensor g_out = empty({int64_t{size_} * 3}, at::kDouble);
  comm_->all_gather(empty({3}, at::kDouble).fill_(2.0), g_out);  // 24 bytes
  at::Tensor rs_out = empty({2}, at::kLong);
  comm_->reduce_scatter(empty({int64_t{size_} * 2}, at::kLong).fill_(3), rs_out, ReduceOp::kSum);
  at::Tensor b = empty({4}, at::kFloat).fill_(4.0);
  comm_->broadcast(b, 0);  // 16 bytes, sent by the root only
  comm_->barrier();
  (void)comm_->all_gather_strings("not counted");

  const auto& stats = comm_->stats();
  EXPECT_EQ(stats.calls, 5);
  EXPECT_EQ(stats.bytes, 40 + 24 + 16 * size_ + (rank_ == 0 ? 16 : 0));
  EXPECT_GE(stats.time_s, 0.0);
  EXPECT_LT(stats.time_s, 60.0);

  comm_->reset_stats();
  EXPECT_EQ(comm_->stats().calls, 0);
  EXPECT_EQ(comm_->stats().bytes, 0);
  EXPECT_EQ(comm_->stats().time_s, 0.0);
}

TEST_P(CommunicatorTest, ArgumentErrorsThrowInvalidArgument) {
  using distcrown::InvalidArgument;
  // Every check fires before any communication, identically on every rank.
  at::Tensor transposed = empty({2, 3}, at::kFloat).fill_(1.0).t();
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_THROW(comm_->all_reduce(transposed, ReduceOp::kSum), InvalidArgument);
  EXPECT_THROW(comm_->broadcast(transposed, 0), InvalidArgument);

  at::Tensor undefined;
  EXPECT_THROW(comm_->all_reduce(undefined, ReduceOp::kSum), InvalidArgument);

  const at::Tensor in = empty({3}, at::kFloat).fill_(1.0);
  at::Tensor wrong_dtype = empty({int64_t{size_} * 3}, at::kDouble);
  EXPECT_THROW(comm_->all_gather(in, wrong_dtype), InvalidArgument);
  at::Tensor wrong_numel = empty({int64_t{size_} * 3 + 1}, at::kFloat);
  EXPECT_THROW(comm_->all_gather(in, wrong_numel), InvalidArgument);
  at::Tensor strided_out = empty({3, size_}, at::kFloat).t();
  if (size_ > 1) {
    EXPECT_THROW(comm_->all_gather(in, strided_out), InvalidArgument);
  }
  EXPECT_THROW(comm_->all_gather(transposed, wrong_numel), InvalidArgument);

  at::Tensor rs_out = empty({3}, at::kFloat);
  const at::Tensor rs_wrong = empty({int64_t{size_} * 3 + 2}, at::kFloat);
  EXPECT_THROW(comm_->reduce_scatter(rs_wrong, rs_out, ReduceOp::kSum), InvalidArgument);
  const at::Tensor rs_dtype = empty({int64_t{size_} * 3}, at::kLong);
  EXPECT_THROW(comm_->reduce_scatter(rs_dtype, rs_out, ReduceOp::kMax), InvalidArgument);

  at::Tensor t = empty({4}, at::kFloat);
  EXPECT_THROW(comm_->broadcast(t, -1), InvalidArgument);
  EXPECT_THROW(comm_->broadcast(t, size_), InvalidArgument);

  if (!is_local()) {
    // A dtype no backend transfers.
    at::Tensor complex = empty({2}, at::kComplexFloat);
    EXPECT_THROW(comm_->all_reduce(complex, ReduceOp::kSum), distcrown::Error);
  }
  if (GetParam() == "mpi") {
    at::Tensor half = empty({2}, at::kHalf);
    EXPECT_THROW(comm_->all_reduce(half, ReduceOp::kSum), distcrown::Error);
  }
  if (GetParam() == "nccl") {
    at::Tensor host = at::ones({2}, at::kFloat);
    EXPECT_THROW(comm_->all_reduce(host, ReduceOp::kSum), InvalidArgument);
  }
  if (device_ == at::kCUDA) {
    at::Tensor host_out = at::empty({int64_t{size_} * 3}, at::kFloat);
    EXPECT_THROW(comm_->all_gather(in, host_out), InvalidArgument);
  }
  EXPECT_EQ(comm_->stats().calls, 0) << "failed calls are not counted";

  // The communicator is still usable afterwards.
  at::Tensor ok = empty({2}, at::kFloat).fill_(1.0);
  comm_->all_reduce(ok, ReduceOp::kSum);
  EXPECT_TENSOR_EQ(ok, at::full({2}, static_cast<double>(size_), at::kFloat));
}

TEST_P(CommunicatorTest, TwoCommunicatorsInterleaved) {
  CommPtr other;
  const std::string& backend = GetParam();
  if (backend == "local") {
    other = distcrown::collective::make_local_communicator();
  } else if (backend == "nccl") {
    other = distcrown::collective::make_nccl_communicator();
  } else {
    other = distcrown::collective::make_mpi_communicator();
  }
  at::Tensor a = empty({3}, at::kFloat).fill_(static_cast<double>(rank_));
  at::Tensor b = empty({3}, at::kFloat).fill_(1.0);
  comm_->all_reduce(a, ReduceOp::kMax);
  other->all_reduce(b, ReduceOp::kSum);
  comm_->barrier();
  other.reset();  // destroying one communicator leaves the other working
  at::Tensor c = empty({1}, at::kLong).fill_(1);
  comm_->all_reduce(c, ReduceOp::kSum);
  EXPECT_TENSOR_EQ(a, at::full({3}, static_cast<double>(size_ - 1), at::kFloat));
  EXPECT_TENSOR_EQ(b, at::full({3}, static_cast<double>(size_), at::kFloat));
  EXPECT_TENSOR_EQ(c, at::full({1}, size_, at::kLong));
}

TEST_P(CommunicatorTest, SplitMakesGroupsOfTheSameColour) {
  if (GetParam() == "nccl") {
    EXPECT_THROW((void)comm_->split(0), distcrown::UnsupportedError);
    return;
  }
  // Two colours: even and odd ranks, each group ranked in the world's order.
  const CommPtr group = comm_->split(rank_ % 2);
  EXPECT_EQ(group->size(), (size_ + 1 - rank_ % 2) / 2);
  EXPECT_EQ(group->rank(), rank_ / 2);
  at::Tensor t = empty({1}, at::kLong).fill_(rank_);
  group->all_reduce(t, ReduceOp::kSum);
  int64_t want = 0;
  for (int r = rank_ % 2; r < size_; r += 2) want += r;
  EXPECT_EQ(t.cpu().item<int64_t>(), want);
  comm_->barrier();  // the world still works beside its parts
}

TEST_P(CommunicatorTest, ExpiryIsAgreedOnEveryRank) {
  if (GetParam() == "nccl" || GetParam() == "mpi_cuda") GTEST_SKIP() << "host messages only";
  // The last rank's deadline has passed, the others' are far: every rank sees it expired at the
  // same call — an exact call at once, checkpoints within the agreement's stride.
  const distcrown::Deadline local(rank_ == size_ - 1 ? 1e-9 : 1e6);
  const distcrown::Deadline agreed =
      local.agreed_by(distcrown::collective::expiry_agreement(comm_));
  EXPECT_TRUE(agreed.expired());
  int calls = 0;
  for (; calls < 64; ++calls) {
    try {
      agreed.check();
    } catch (const distcrown::DeadlineReached&) {
      break;
    }
  }
  EXPECT_LT(calls, 64);
  std::vector<std::string> all = comm_->all_gather_strings(std::to_string(calls));
  for (const std::string& c : all) EXPECT_EQ(c, all.front());
  // Nobody expired: nobody stops.
  const distcrown::Deadline far =
      distcrown::Deadline(1e6).agreed_by(distcrown::collective::expiry_agreement(comm_));
  EXPECT_FALSE(far.expired());
  for (int i = 0; i < 40; ++i) EXPECT_NO_THROW(far.check());
}

INSTANTIATE_TEST_SUITE_P(Backends, CommunicatorTest,
                         ::testing::Values("local", "mpi", "mpi_cuda", "nccl"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ctest says how it started the process (DISTCROWN_EXPECT_MPIRUN, tests/CMakeLists.txt): 1 under
// mpirun, which sets OMPI_COMM_WORLD_SIZE for every rank; 0 for the singleton run. Started by
// hand, the answer must follow OMPI_COMM_WORLD_SIZE.
TEST(Communicator, LaunchedUnderMpi) {
  const bool launched = distcrown::testing::launched_under_mpi_before_init;
  const char* expect = std::getenv("DISTCROWN_EXPECT_MPIRUN");
  const bool under_mpirun = expect != nullptr ? std::string(expect) == "1"
                                              : std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  EXPECT_EQ(launched, under_mpirun)
      << "DISTCROWN_EXPECT_MPIRUN=" << (expect != nullptr ? expect : "(unset)")
      << ", OMPI_COMM_WORLD_SIZE="
      << (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ? "set" : "unset");
  if (under_mpirun) {
    EXPECT_NE(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr) << "mpirun sets it for every rank";
  }
  if (world_size() > 1) {
    EXPECT_TRUE(launched);
  }
  // After MPI_Init, a process under mpirun still says so.
  if (under_mpirun) {
    EXPECT_TRUE(distcrown::collective::launched_under_mpi());
  }
}

TEST(Communicator, NcclUnavailableThrowsError) {
  if (distcrown::collective::nccl_available()) {
    GTEST_SKIP() << "NCCL is available here; the unavailable path is tested on CPU-only machines";
  }
  // Collective even when it fails: every rank agrees there is no GPU before anyone throws.
  EXPECT_THROW((void)distcrown::collective::make_nccl_communicator(), distcrown::Error);
}

// The watchdog (collective_watch.hpp): the last rank stops participating for 2 s; every other
// rank's all_reduce ends after its 0.5 s collective timeout (and at most 0.5 s of asking) in
// CollectiveTimeout naming the collective, the missing rank and the ranks that arrived. The last
// rank then makes the call (no timeout), which completes the collective the others left pending, so
// the job ends cleanly.
TEST(Communicator, CollectiveTimeoutNamesTheRankThatDidNotArrive) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks or more";
  const CommPtr comm = distcrown::collective::make_mpi_communicator();
  EXPECT_EQ(comm->collective_timeout(), distcrown::collective::kDefaultCollectiveTimeoutSeconds);
  EXPECT_THROW(comm->set_collective_timeout(-1), distcrown::InvalidArgument);
  const int last = comm->size() - 1;
  const bool late = comm->rank() == last;
  comm->set_collective_timeout(late ? 0.0 : 0.5);
  const CommPtr part = comm->split(0);
  EXPECT_EQ(part->collective_timeout(), comm->collective_timeout());
  at::Tensor t = at::ones({4}, at::kFloat);
  if (late) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    comm->all_reduce(t, ReduceOp::kSum);
    EXPECT_TRUE(at::equal(t, at::full({4}, comm->size(), at::kFloat)));
  } else {
    std::string message;
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->all_reduce(t, ReduceOp::kSum);
    } catch (const distcrown::collective::CollectiveTimeout& e) {
      message = e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 0.5);
    EXPECT_NE(message.find("collective all_reduce #"), std::string::npos) << message;
    EXPECT_NE(message.find("rank " + std::to_string(last) + " did not arrive"), std::string::npos)
        << message;
    std::string arrived = last == 1 ? "arrived: rank 0" : "arrived: ranks 0";
    for (int r = 1; r < last; ++r) arrived += ", " + std::to_string(r);
    EXPECT_NE(message.find(arrived), std::string::npos) << message;
  }
  part->set_collective_timeout(0.0);
  part->barrier();  // every rank is here again: the pending all_reduce has completed
}

TEST(Communicator, LocalIsSingleRankEverywhere) {
  const CommPtr local = distcrown::collective::make_local_communicator();
  EXPECT_EQ(local->size(), 1);
  EXPECT_EQ(local->rank(), 0);
  at::Tensor t = at::full({2}, 5.0, at::kFloat);
  local->broadcast(t, 0);
  at::Tensor out = at::empty({2, 1}, at::kFloat);
  local->reduce_scatter(t, out, ReduceOp::kMin);
  EXPECT_TRUE(at::equal(out, at::full({2, 1}, 5.0, at::kFloat)));
  EXPECT_EQ(local->all_gather_strings("x"), std::vector<std::string>{"x"});
}

}  // namespace
