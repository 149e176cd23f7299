// CUDA side of the memory accountant: LibTorch's caching-allocator statistics. Compiled against
// the CUDA headers only when CMake found the toolkit (DISTCROWN_HAVE_CUDA); without it the
// functions say so instead of returning zeros.
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

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
}  // namespace

Usage cuda_usage(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  const auto& bytes =
      stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return {bytes.current, bytes.peak};
}

void reset_cuda_peak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

#else

Usage cuda_usage(int /*device*/) { throw Error("distcrown was built without CUDA"); }
void reset_cuda_peak(int /*device*/) { throw Error("distcrown was built without CUDA"); }

#endif

}  // namespace distcrown::memory
