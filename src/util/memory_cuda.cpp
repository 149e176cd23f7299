// CUDA side of the memory accountant: LibTorch's caching-allocator statistics. Compiled against
// the CUDA headers only when CMake found the toolkit (DISTCROWN_HAVE_CUDA); without it the
// functions say so instead of returning zeros.
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

#include <algorithm>
#include <array>
#include <atomic>

#if defined(DISTCROWN_HAVE_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace distcrown::memory {

#if defined(DISTCROWN_HAVE_CUDA)

namespace {
// −1 (an at::Device(at::kCUDA) without an index): the current device, as tensors created there use.
c10::DeviceIndex index_of(int device) {
  return device < 0 ? c10::cuda::current_device() : static_cast<c10::DeviceIndex>(device);
}

// Per device, the run's peak before the last step reset (part of the accountant's state).
std::array<std::atomic<int64_t>, 64> folded_peak{};

std::atomic<int64_t>& folded(c10::DeviceIndex d) { return folded_peak.at(static_cast<size_t>(d)); }

c10::CachingAllocator::Stat allocated(c10::DeviceIndex d) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d);
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
}  // namespace

Usage cuda_usage(int device) {
  const c10::DeviceIndex d = index_of(device);
  const auto bytes = allocated(d);
  return {bytes.current, std::max(bytes.peak, folded(d).load())};
}

void reset_cuda_peak(int device) {
  const c10::DeviceIndex d = index_of(device);
  folded(d) = 0;
  c10::cuda::CUDACachingAllocator::resetPeakStats(d);
}

int64_t cuda_step_peak_bytes(int device) { return allocated(index_of(device)).peak; }

void reset_cuda_step_peak(int device) {
  const c10::DeviceIndex d = index_of(device);
  const int64_t peak = allocated(d).peak;
  int64_t seen = folded(d).load();
  while (peak > seen && !folded(d).compare_exchange_weak(seen, peak)) {
  }
  c10::cuda::CUDACachingAllocator::resetPeakStats(d);
}

int64_t cuda_free_bytes(int device) {
  return static_cast<int64_t>(
      c10::cuda::CUDACachingAllocator::get()->getMemoryInfo(index_of(device)).first);
}

#else

Usage cuda_usage(int /*device*/) { throw Error("distcrown was built without CUDA"); }
void reset_cuda_peak(int /*device*/) { throw Error("distcrown was built without CUDA"); }
int64_t cuda_step_peak_bytes(int /*device*/) { throw Error("distcrown was built without CUDA"); }
void reset_cuda_step_peak(int /*device*/) { throw Error("distcrown was built without CUDA"); }
int64_t cuda_free_bytes(int /*device*/) { throw Error("distcrown was built without CUDA"); }

#endif

Usage usage(const c10::Device& device) {
  return device.is_cuda() ? cuda_usage(device.index()) : usage();
}

void reset_peak(const c10::Device& device) {
  device.is_cuda() ? reset_cuda_peak(device.index()) : reset_peak();
}

int64_t step_peak_bytes(const c10::Device& device) {
  return device.is_cuda() ? cuda_step_peak_bytes(device.index()) : step_peak_bytes();
}

void reset_step_peak(const c10::Device& device) {
  device.is_cuda() ? reset_cuda_step_peak(device.index()) : reset_step_peak();
}

}  // namespace distcrown::memory
