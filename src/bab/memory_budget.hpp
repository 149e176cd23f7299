#pragma once
// The memory budget of ReLU splitting (RunContext::memory_limit_bytes): each round's batch is the
// largest (<= the configured batch, at most doubling per round) whose cost per parent, measured
// in the last rounds, fits under the limit with what is live; when not even one parent fits (or,
// deterministic, the fixed batch does not) the search ends unknown.
#include <cstdint>
#include <deque>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/bab.hpp"
#include "domain.hpp"

namespace distcrown::bab::detail {

/// The limit a branch and bound keeps to (0: none) for a requested one (0: the default): CUDA
/// tensors are counted by LibTorch's caching allocator; CPU tensors by the memory accountant,
/// only once installed (a limit is refused otherwise: nothing would enforce it).
int64_t memory_limit(int64_t requested, const at::Device& device);

class BatchBudget {
 public:
  /// `limit`: memory_limit()'s; `holders`: the units that hold domains (groups, or ranks under
  /// spec-parallel).
  BatchBudget(const BabOptions& options, int64_t limit, const at::Device& device, int holders)
      : o_(options), limit_(limit), device_(device), holders_(holders) {}

  /// This rank's cap on the next round's batch (BabOptions::batch's units), after a round
  /// planned with `last_batch`, with `queued` domains held; sets mine.memory_full (with the live
  /// bytes and the limit) when not even one domain fits, or, deterministic, the fixed batch.
  void cap(RoundReport& mine, int64_t last_batch, int64_t queued) const;
  /// Around a round's work on `parents` parents: the tensor bytes from its start to its peak,
  /// per parent (the largest over the last attack_every rounds, so that a round with a PGD
  /// attack is among them).
  void begin_round(size_t parents);
  void end_round(size_t parents);
  [[nodiscard]] int64_t limit() const { return limit_; }

 private:
  const BabOptions& o_;
  int64_t limit_;
  at::Device device_;
  int holders_;
  bool measuring_ = false;
  int64_t live_before_ = 0;
  double per_parent_bytes_ = 0;  // 0: not measured yet
  std::deque<double> per_parent_seen_;
};

}  // namespace distcrown::bab::detail
