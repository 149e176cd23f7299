#include "distcrown/util/memory.hpp"

#include <atomic>
#include <mutex>

#include <c10/core/CPUAllocator.h>

namespace distcrown::memory {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

// Context kept in each DataPtr: the wrapped allocation and its size, so the deleter can subtract it.
struct CountedBlock {
  c10::DataPtr inner;
  int64_t bytes;
};

void count_free(void* ctx) {
  auto* block = static_cast<CountedBlock*>(ctx);
  g_live.fetch_sub(block->bytes, std::memory_order_relaxed);
  delete block;  // releases the wrapped DataPtr (and so the memory) through its own deleter
}

void bump_peak(int64_t now) {
  int64_t seen = g_peak.load(std::memory_order_relaxed);
  while (now > seen && !g_peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr raw = inner_->allocate(n);
    void* data = raw.get();
    const auto bytes = static_cast<int64_t>(n);
    auto block = std::make_unique<CountedBlock>(CountedBlock{std::move(raw), bytes});
    bump_peak(g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    return {data, block.release(), &count_free, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: LibTorch keeps a raw pointer to the allocator until process exit.
    static CountingAllocator counting(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&counting, /*priority=*/100);
    g_installed = true;
  });
}

bool counting_installed() { return g_installed.load(); }
int64_t live_bytes() { return g_live.load(std::memory_order_relaxed); }
int64_t peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_peak() { g_peak.store(g_live.load(std::memory_order_relaxed)); }
Usage usage() { return {live_bytes(), peak_bytes()}; }

}  // namespace distcrown::memory
