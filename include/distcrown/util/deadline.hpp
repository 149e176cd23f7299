#pragma once
// Deadlines for long computations (`verify --timeout`). A Deadline is a value: a start time and a
// length, copied into the options of every phase that can run long (the attack, the root CROWN
// and α-CROWN passes, each branch-and-bound round). Those phases call a Checkpoint at points that
// come at least every few milliseconds on the networks we bound (between CROWN nodes and row
// chunks, between α-CROWN iterations, between attack steps and BaB rounds); once the deadline has
// passed the checkpoint throws DeadlineReached, which unwinds the phase (freeing its tensors) to
// the caller that owns the deadline, which answers "timeout". A Checkpoint can also carry a
// Heartbeat (not owned), called at every checkpoint so that a progress line can be printed from
// inside a long pass.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "distcrown/util/error.hpp"

namespace distcrown {

/// Thrown by a checkpoint once its deadline has passed. Not a failure: the owner of the
/// deadline turns it into a `timeout` answer.
class DeadlineReached : public Error {
 public:
  DeadlineReached() : Error("deadline reached") {}
};

/// Makes Deadline::expired() collective over processes that run the same steps in step (the
/// ranks of one model-parallel group, or every rank while all run the same phase): each call is
/// one agreement, true on every process as soon as it is true on one, so no process leaves a
/// computation whose collectives the others are still waiting in. Implemented over a
/// Communicator (collective/agreement.hpp).
class ExpiryAgreement {
 public:
  ExpiryAgreement() = default;
  ExpiryAgreement(const ExpiryAgreement&) = delete;
  ExpiryAgreement& operator=(const ExpiryAgreement&) = delete;
  ExpiryAgreement(ExpiryAgreement&&) = delete;
  ExpiryAgreement& operator=(ExpiryAgreement&&) = delete;
  virtual ~ExpiryAgreement() = default;
  /// Collective: true on every process when `local` is true on any. A call that is not `exact`
  /// (a checkpoint's) may be answered false without communicating — every process skips the
  /// same calls — so that checkpoints a few microseconds apart do not each cost a round trip.
  virtual bool any(bool local, bool exact) = 0;
};

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  /// No deadline: never expires.
  Deadline() = default;
  /// `seconds` from now; <= 0: none.
  explicit Deadline(double seconds) : Deadline(Clock::now(), seconds) {}
  /// `seconds` from `start`; <= 0: none.
  Deadline(Clock::time_point start, double seconds) : start_(start), seconds_(seconds) {}
  /// `seconds` from the moment this process started (Linux: /proc/self/stat; elsewhere from
  /// now), so that the time spent loading the executable and its libraries counts, as it does
  /// for a harness that times the whole command.
  static Deadline since_process_start(double seconds);

  /// Seconds since the start.
  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  /// Past the deadline; with an agreement (agreed_by), past it on some process of the
  /// agreement, and then a collective call that every one of them must make at the same step.
  [[nodiscard]] bool expired() const { return expired(true); }
  /// The same deadline, whose expired() is agreed by `agreement` (null: local again).
  [[nodiscard]] Deadline agreed_by(std::shared_ptr<ExpiryAgreement> agreement) const {
    Deadline d = *this;
    d.agreement_ = std::move(agreement);
    return d;
  }
  [[nodiscard]] double seconds() const { return seconds_; }
  /// The moment it expires; none without a limit.
  [[nodiscard]] std::optional<Clock::time_point> stop_at() const {
    if (seconds_ <= 0) return std::nullopt;
    return start_ +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
  }
  /// Throws DeadlineReached once expired; agreed only every few calls (ExpiryAgreement::any).
  void check() const {
    if (expired(false)) throw DeadlineReached();
  }

 private:
  [[nodiscard]] bool expired(bool exact) const {
    if (seconds_ <= 0) return false;  // every process has the same length: no call to agree on
    const bool local = elapsed() >= seconds_;
    return agreement_ ? agreement_->any(local, exact) : local;
  }

  Clock::time_point start_ = Clock::now();
  double seconds_ = 0;
  std::shared_ptr<ExpiryAgreement> agreement_;  // shared by the copies handed to each phase
};

/// Called at every checkpoint; an implementation decides itself whether to act (e.g. print a
/// progress line when a few seconds have passed since the last).
class Heartbeat {
 public:
  Heartbeat() = default;
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  Heartbeat(Heartbeat&&) = delete;
  Heartbeat& operator=(Heartbeat&&) = delete;
  virtual ~Heartbeat() = default;
  virtual void beat() = 0;
};

/// What a long loop calls between steps: the heartbeat (if any), then the deadline check.
struct Checkpoint {
  Deadline deadline;
  Heartbeat* heartbeat = nullptr;  // not owned; may be null

  void operator()() const {
    if (heartbeat != nullptr) heartbeat->beat();
    deadline.check();
  }
};

/// Seconds this process has run (0 where it cannot be read).
double process_age_seconds();

/// Peak resident set size of this process in bytes (getrusage ru_maxrss; 0 where unavailable).
int64_t peak_resident_bytes();

}  // namespace distcrown
