#pragma once
// Private to src/collective: the watchdog of the MPI and NCCL communicators. A collective is
// started nonblocking (MPI_I*, or NCCL on a stream) and then waited for here, polling, so that a
// wait longer than the communicator's collective timeout ends in CollectiveTimeout instead of a
// hang. Its message names the collective and the ranks that did not arrive: a rank that times
// out asks every other rank, over a duplicate of the communicator, what it is waiting in; ranks
// waiting in a collective of this communicator answer from their own poll loop, so a rank that is
// computing, stopped, dead or unreachable is the one that does not answer.
//
// Every 64 polls the loop yields the core (the kernel's network work, oversubscribed ranks);
// after a millisecond it also answers questions and reads the clock against the timeout.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "mpi_environment.hpp"

namespace distcrown::collective::detail {

class CollectiveWatch {
 public:
  /// Collective over `comm` (duplicates it for the questions and answers).
  CollectiveWatch(MPI_Comm comm, std::string backend);

  /// Polls `done` until it returns true. Past `timeout_s` (> 0) asks the other ranks where they
  /// are, then throws CollectiveTimeout; `on_timeout` runs first (NCCL: ncclCommAbort).
  void wait(const char* op, double timeout_s, const std::function<bool()>& done,
            const std::function<void()>& on_timeout = {});

  /// An MPI request's completion as a `done` for wait().
  [[nodiscard]] static std::function<bool()> request_done(MPI_Request& request);

 private:
  // A question or an answer: the asker's question number and the answerer's state.
  using Message = std::array<char, 96>;

  void answer_questions();
  // Receives what the side channel holds: answers questions; stores answers to this rank's
  // current question in `answers` (by rank) when given.
  void collect(std::vector<std::string>* answers);
  [[noreturn]] void time_out(const char* op, double timeout_s, const std::function<bool()>& done,
                             const std::function<void()>& on_timeout);
  [[nodiscard]] std::string describe(const std::vector<std::string>& answers, double timeout_s,
                                     const char* op) const;
  void send(int to, int tag, int64_t question);

  std::unique_ptr<MpiComm> side_;
  std::string backend_;
  int rank_ = 0;
  int size_ = 1;
  int64_t sequence_ = 0;  // collectives started on this communicator
  int64_t question_ = 0;  // questions this rank asked
  std::string state_;     // "all_reduce #12" while waiting, else ""
  std::vector<std::pair<MPI_Request, std::unique_ptr<Message>>> outbox_;  // sends in flight
};

}  // namespace distcrown::collective::detail
