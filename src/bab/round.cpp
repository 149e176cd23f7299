#include "round.hpp"

#include <array>
#include <cstdio>
#include <string>

namespace distcrown::bab {

int64_t round_batch(const BabOptions& o, const BabWorld& w) {
  const bool per_group = o.batch_scope == BatchScope::kGroup ||
                         (o.batch_scope == BatchScope::kAuto && !o.deterministic);
  return per_group ? o.batch * w.groups : o.batch;
}

}  // namespace distcrown::bab

namespace distcrown::bab::detail {

RoundStart start_round(const std::vector<RoundReport>& groups, const RoundTally& tally,
                       const BabOptions& options, std::string_view exhausted, Progress& progress,
                       BabResult& res) {
  RoundStart s;
  const auto end = [&](BabStatus status, std::string reason = {}) {
    if (!reason.empty()) res.reason = std::move(reason);
    s.end = status;
    return s;
  };
  if (tally.falsified) return end(BabStatus::kFalsified);
  if (tally.timed_out) return end(BabStatus::kTimeout);
  // The smallest cap of every rank (exchange_reports gave every group the world's): the same
  // batch everywhere.
  s.batch = options.batch;
  for (const RoundReport& g : groups) s.batch = std::min(s.batch, g.batch_cap);
  s.plan = plan_round(groups, s.batch);
  if (s.plan.empty()) {
    if (tally.no_splittable) {
      return end(BabStatus::kUnknown,
                 "no splittable neurons (the network's nonlinearities cannot be split) and "
                 "alpha-CROWN does not prove the property");
    }
    if (tally.exhausted) return end(BabStatus::kUnknown, std::string(exhausted));
    return end(BabStatus::kProved);
  }
  res.worst_value = s.plan.front().value;
  progress.report(res.rounds, res.domains_bounded, tally.queued, res.worst_value);
  if (const RoundReport& full = groups.front(); full.memory_full) {
    res.memory_limited = true;
    std::array<char, 96> text{};
    std::snprintf(text.data(), text.size(), "memory limit reached: %.3g MB live, limit %.3g MB",
                  double(full.live_bytes) / 1e6, double(full.limit_bytes) / 1e6);
    return end(BabStatus::kUnknown, text.data());
  }
  if (options.max_rounds > 0 && res.rounds >= options.max_rounds) {
    return end(BabStatus::kUnknown, "round limit reached");
  }
  ++res.rounds;
  return s;
}

}  // namespace distcrown::bab::detail
