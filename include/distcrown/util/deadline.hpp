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
#include <optional>

#include "distcrown/util/error.hpp"

namespace distcrown {

/// Thrown by a checkpoint once its deadline has passed. Not a failure: the owner of the
/// deadline turns it into a `timeout` answer.
class DeadlineReached : public Error {
 public:
  DeadlineReached() : Error("deadline reached") {}
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
  [[nodiscard]] bool expired() const { return seconds_ > 0 && elapsed() >= seconds_; }
  [[nodiscard]] double seconds() const { return seconds_; }
  /// The moment it expires; none without a limit.
  [[nodiscard]] std::optional<Clock::time_point> stop_at() const {
    if (seconds_ <= 0) return std::nullopt;
    return start_ +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
  }
  /// Throws DeadlineReached once expired.
  void check() const {
    if (expired()) throw DeadlineReached();
  }

 private:
  Clock::time_point start_ = Clock::now();
  double seconds_ = 0;
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
