#include "distcrown/util/memory.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>

namespace distcrown::memory {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_step_peak{0};
std::atomic<bool> g_installed{false};

// Each block carries its size in a header of kAlignment bytes just before the data, so the
// DataPtr stays "simple" (data == context), which some LibTorch kernels assert.
constexpr size_t kHeader = c10::gAlignment;

void bump(std::atomic<int64_t>& peak, int64_t now) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void bump_peak(int64_t now) {
  bump(g_peak, now);
  bump(g_step_peak, now);
}

void counted_free(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof bytes);
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  c10::free_cpu(base);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    const auto bytes = static_cast<int64_t>(n);
    std::memcpy(base, &bytes, sizeof bytes);
    bump_peak(g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    void* data = base + kHeader;
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Static on purpose: LibTorch keeps a raw pointer to the allocator until process exit.
    static CountingAllocator counting;
    c10::SetCPUAllocator(&counting, /*priority=*/100);
    g_installed = true;
  });
}

bool keep_freed_heap() {
#if defined(__GLIBC__)
  // Read before any thread is started (main()'s first lines): getenv is safe there.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||  // NOLINT(concurrency-mt-unsafe)
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {  // NOLINT(concurrency-mt-unsafe)
    return false;
  }
  constexpr int kMmapThreshold = 32 << 20;  // glibc's largest dynamic threshold (64-bit)
  constexpr int kTrimThreshold = 256 << 20;
  // Setting either fixes both (glibc stops adapting them), so both are set.
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

bool counting_installed() { return g_installed.load(); }
int64_t live_bytes() { return g_live.load(std::memory_order_relaxed); }
int64_t peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_peak() { g_peak.store(g_live.load(std::memory_order_relaxed)); }
int64_t step_peak_bytes() { return g_step_peak.load(std::memory_order_relaxed); }
void reset_step_peak() { g_step_peak.store(g_live.load(std::memory_order_relaxed)); }
Usage usage() { return {live_bytes(), peak_bytes()}; }

}  // namespace distcrown::memory
