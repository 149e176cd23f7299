#include "memory_budget.hpp"

#include <algorithm>
#include <cmath>

#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"

namespace distcrown::bab::detail {

int64_t memory_limit(int64_t requested, const at::Device& device) {
  if (requested < 0) throw InvalidArgument("memory limit must be >= 0 bytes");
  if (device.is_cuda()) return requested > 0 ? requested : default_memory_limit_bytes(true);
  if (!device.is_cpu()) {
    if (requested > 0) {
      throw InvalidArgument("a memory limit is enforced on CPU and CUDA devices only, not " +
                            device.str());
    }
    return 0;
  }
  if (!memory::counting_installed()) {
    if (requested > 0) {
      throw InvalidArgument(
          "a memory limit needs the memory accountant: call "
          "memory::install_counting_allocator() first");
    }
    return 0;
  }
  return requested > 0 ? requested : default_memory_limit_bytes();
}

void BatchBudget::cap(RoundReport& mine, int64_t last_batch, int64_t queued) const {
  mine.batch_cap = o_.batch;
  mine.memory_full = false;
  if (limit_ <= 0) return;
  const int64_t live = memory::usage(device_).live_bytes;
  mine.live_bytes = live;
  mine.limit_bytes = limit_;
  const auto holders = double(holders_);
  const double room = double(limit_) - double(live);
  if (o_.deterministic) {
    // The batch stays fixed: its predicted peak (this holder's share of it, or what it holds
    // when less) must fit.
    const double share = std::min(std::ceil(double(o_.batch) / holders), double(queued));
    mine.memory_full = room <= 0 || per_parent_bytes_ * share > room;
    return;
  }
  if (room <= 0) {
    mine.memory_full = true;
    return;
  }
  if (per_parent_bytes_ <= 0) return;                       // nothing measured yet
  const double fit = std::floor(room / per_parent_bytes_);  // parents per holder
  if (fit < 1) {
    mine.memory_full = true;
    return;
  }
  // Grows back at most by doubling: the cost per domain was measured at the last batch.
  const double cap = std::min({double(o_.batch), 2.0 * double(last_batch), fit * holders});
  mine.batch_cap = std::max<int64_t>(1, int64_t(cap));
}

void BatchBudget::begin_round(size_t parents) {
  // On the accountant's step peak (its run peak stays the whole run's).
  measuring_ = limit_ > 0 && parents > 0;
  if (measuring_) memory::reset_step_peak(device_);
  live_before_ = memory::usage(device_).live_bytes;
}

void BatchBudget::end_round(size_t parents) {
  if (!measuring_) return;
  per_parent_seen_.push_back(
      double(std::max<int64_t>(0, memory::step_peak_bytes(device_) - live_before_)) /
      double(parents));
  if (int64_t(per_parent_seen_.size()) > std::max(1, o_.attack_every)) {
    per_parent_seen_.pop_front();
  }
  per_parent_bytes_ = *std::max_element(per_parent_seen_.begin(), per_parent_seen_.end());
}

}  // namespace distcrown::bab::detail
