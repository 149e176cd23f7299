#pragma once
// Branch and bound over one objective (a VNNLIB disjunct): common options, results and the
// deadline / progress helpers shared by ReLU splitting (β-CROWN) and input splitting.
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "distcrown/bab/attack.hpp"

namespace distcrown::bab {

enum class Branching { kBabsr, kFsb };

/// Names of the branching heuristics (util/enum_names.hpp), as --branching takes them.
constexpr auto enum_table(Branching) {
  using P = std::pair<Branching, std::string_view>;
  return std::array{P{Branching::kBabsr, "babsr"}, P{Branching::kFsb, "fsb"}};
}

struct BabOptions {
  /// Domains taken from the queue per round; their 2·batch children are bounded in one call.
  int64_t batch = 64;
  Branching branching = Branching::kFsb;
  int fsb_candidates = 3;  // FSB: best-scored neurons per domain whose splits are tried
  int iterations = 20;     // α/β optimisation steps per round (ReLU splitting)
  double lr_alpha = 0.1;
  double lr_beta = 0.05;
  int root_iterations = 20;  // α-CROWN at the root
  double root_lr = 0.5;
  /// Same work at any world size and every run: fixed batch, no early exit from the
  /// optimisation when a batch is proved, no adaptive resizing.
  bool deterministic = false;
  int64_t max_rounds = 0;  // 0 = until decided or timeout
  int attack_every = 5;    // rounds between attacks from the worst domains (0 = never)
  AttackOptions attack;
  bool progress = false;  // stderr, at most once a second
};

enum class BabStatus { kProved, kFalsified, kTimeout, kUnknown };

struct BabResult {
  BabStatus status = BabStatus::kUnknown;
  std::optional<Counterexample> counterexample;
  int64_t rounds = 0;
  int64_t domains_bounded = 0;
  int64_t max_queue = 0;
  double worst_value = 0;  // lowest domain value left (when not proved)
  std::string reason;      // why unknown
};

class Deadline {
 public:
  explicit Deadline(double seconds) : start_(std::chrono::steady_clock::now()), seconds_(seconds) {}
  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  [[nodiscard]] bool expired() const { return seconds_ > 0 && elapsed() >= seconds_; }
  [[nodiscard]] double seconds() const { return seconds_; }
  /// The moment it expires; none without a limit.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> stop_at() const {
    if (seconds_ <= 0) return std::nullopt;
    return start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(seconds_));
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double seconds_;
};

/// One progress line on stderr at most once a second.
class Progress {
 public:
  Progress(bool enabled, const Deadline& deadline) : enabled_(enabled), deadline_(deadline) {}
  void report(const char* what, int64_t domains_left, double worst, int64_t rounds);

 private:
  bool enabled_;
  const Deadline& deadline_;
  double last_ = -1.0;
};

}  // namespace distcrown::bab
