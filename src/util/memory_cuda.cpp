// CUDA side of the memory accountant: LibTorch's caching-allocator statistics. Compiled against
// the CUDA headers only when CMake found the toolkit (DISTCROWN_HAVE_CUDA); without it the
// functions say so instead of returning zeros.
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

#if defined(DISTCROWN_HAVE_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace distcrown::memory {

#if defined(DISTCROWN_HAVE_CUDA)

Usage cuda_usage(int device) {
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  const auto& bytes =
      stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return {bytes.current, bytes.peak};
}

void reset_cuda_peak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

#else

Usage cuda_usage(int /*device*/) { throw Error("distcrown was built without CUDA"); }
void reset_cuda_peak(int /*device*/) { throw Error("distcrown was built without CUDA"); }

#endif

}  // namespace distcrown::memory
