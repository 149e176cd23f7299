#pragma once
// Memory accounting: live and peak tensor bytes of this process.
//
// CPU tensors are counted by a counting allocator wrapped around LibTorch's default CPU allocator
// (installed with c10::SetCPUAllocator); CUDA tensors are read from the caching allocator's stats.
// This is the one piece of global mutable state the library has: the allocator hook is process-wide
// by LibTorch's design.
#include <cstdint>

#include <c10/core/Device.h>

namespace distcrown::memory {

/// Installs the counting CPU allocator (idempotent, thread-safe). Tensors allocated before this
/// call are not counted; call it first thing in main() or a test's SetUp.
void install_counting_allocator();

/// Tells glibc's malloc to keep freed memory for the next allocation instead of handing it back
/// to the kernel: blocks under 32 MiB come from the heap (not a fresh mmap each), and the heap's
/// top is trimmed only beyond 256 MiB of free space. A bounding pass allocates and frees
/// tensors of a few hundred KiB to a few MiB thousands of times; with glibc's defaults many of
/// them are fresh pages, each a page fault (~15 % of CROWN's time on oval21_base, perf). The
/// cost: up to 256 MiB freed memory may stay in the process's resident set after a peak.
/// Process-wide, so main() calls it, not the library. Does nothing (returns false) where malloc
/// is not glibc's or MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ are set (the user's choice).
bool keep_freed_heap();

/// True once install_counting_allocator() has run.
bool counting_installed();

/// Bytes of CPU tensor storage alive right now (0 when not installed).
int64_t live_bytes();

/// Largest live_bytes() seen since the last reset_peak().
int64_t peak_bytes();

/// Restarts peak tracking from the current live value.
void reset_peak();

/// A second peak for measuring one step (a branch-and-bound round) without touching
/// peak_bytes(), which reports the whole run: the largest live_bytes() since the last
/// reset_step_peak().
int64_t step_peak_bytes();
void reset_step_peak();

/// Snapshot of the counters, e.g. baseline after loading and peak during bounding.
struct Usage {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
};
Usage usage();

/// Live and peak bytes of LibTorch's CUDA caching allocator on one device (allocated, not
/// reserved; device −1: the current one). Throws distcrown::Error when built without CUDA or the
/// device is not usable.
Usage cuda_usage(int device);
void reset_cuda_peak(int device);

/// The CUDA counterpart of step_peak_bytes()/reset_step_peak(). The caching allocator keeps one
/// peak, so a step reset first folds it into the run's, which cuda_usage() keeps reporting.
int64_t cuda_step_peak_bytes(int device);
void reset_cuda_step_peak(int device);

/// Free memory on the device as the driver reports it (cudaMemGetInfo): what this process, and
/// any other on the same GPU, can still take.
int64_t cuda_free_bytes(int device);

/// The counters of the device that tensors are computed on, for code that serves both: on the
/// CPU the accountant's (usage(), reset_peak(), step_peak_bytes(), reset_step_peak()), on a CUDA
/// device the caching allocator's (cuda_usage() and the rest, at device.index(); −1: current).
Usage usage(const c10::Device& device);
void reset_peak(const c10::Device& device);
int64_t step_peak_bytes(const c10::Device& device);
void reset_step_peak(const c10::Device& device);

}  // namespace distcrown::memory
