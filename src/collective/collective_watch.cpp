#include "collective_watch.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <thread>
#include <utility>

#include "checks.hpp"
#include "distcrown/collective/communicator.hpp"

namespace distcrown::collective::detail {
namespace {

constexpr int kQuestionTag = 101;
constexpr int kAnswerTag = 102;
// A collective that has not completed within this long starts answering questions.
constexpr double kPatientAfterSeconds = 1e-3;
// How long a rank that timed out waits for the answers (the others answer from their poll loop).
constexpr double kMaxAnswerWaitSeconds = 2.0;

// "12 all_reduce #3" -> (12, "all_reduce #3").
std::pair<int64_t, std::string> parse(const char* text) {
  int64_t number = -1;
  int used = 0;
  if (std::sscanf(text, "%" SCNd64 " %n", &number, &used) != 1) return {-1, ""};
  return {number, std::string(text + used)};
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace

CollectiveWatch::CollectiveWatch(MPI_Comm comm, std::string backend)
    : backend_(std::move(backend)) {
  MPI_Comm side = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &side), "MPI_Comm_dup");
  side_ = std::make_unique<MpiComm>(side);
  check_mpi(MPI_Comm_set_errhandler(side, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(side, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(side, &size_), "MPI_Comm_size");
}

std::function<bool()> CollectiveWatch::request_done(MPI_Request& request) {
  return [&request] {
    int flag = 0;
    check_mpi(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  };
}

void CollectiveWatch::wait(const char* op, double timeout_s, const std::function<bool()>& done,
                           const std::function<void()>& on_timeout) {
  ++sequence_;
  state_ = std::string(op) + " #" + std::to_string(sequence_);
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t spin = 0;; ++spin) {
    if (done()) {
      state_.clear();
      return;
    }
    if (spin % 64 != 63) continue;
    // Every 64 polls the core goes to whoever needs it: the kernel's network work (over TCP on
    // two busy cores a spinning wait took 4 ms an all-gather, a yielding one 0.07 ms) and
    // oversubscribed ranks.
    std::this_thread::yield();
    const double waited = seconds_since(start);
    if (waited < kPatientAfterSeconds) continue;
    answer_questions();
    if (timeout_s > 0 && waited > timeout_s) time_out(op, timeout_s, done, on_timeout);
  }
}

void CollectiveWatch::send(int to, int tag, int64_t question) {
  // Sends complete in the background; a buffer is dropped once MPI is done with it.
  std::erase_if(outbox_, [](std::pair<MPI_Request, std::unique_ptr<Message>>& sent) {
    int flag = 0;
    MPI_Test(&sent.first, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  });
  auto message = std::make_unique<Message>();
  std::snprintf(message->data(), message->size(), "%" PRId64 " %s", question, state_.c_str());
  MPI_Request request = MPI_REQUEST_NULL;
  // To a dead or unreachable rank the send fails or never completes: either is an answer.
  if (MPI_Isend(message->data(), static_cast<int>(message->size()), MPI_CHAR, to, tag, side_->get(),
                &request) == MPI_SUCCESS) {
    outbox_.emplace_back(request, std::move(message));
  }
}

void CollectiveWatch::answer_questions() { collect(nullptr); }

void CollectiveWatch::collect(std::vector<std::string>* answers) {
  for (;;) {
    int flag = 0;
    MPI_Status status{};
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, side_->get(), &flag, &status) != MPI_SUCCESS ||
        flag == 0) {
      return;
    }
    Message message{};
    if (MPI_Recv(message.data(), static_cast<int>(message.size()), MPI_CHAR, status.MPI_SOURCE,
                 status.MPI_TAG, side_->get(), MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return;
    }
    message.back() = '\0';
    const auto [number, state] = parse(message.data());
    if (status.MPI_TAG == kQuestionTag) {
      send(status.MPI_SOURCE, kAnswerTag, number);
    } else if (answers != nullptr && number == question_) {
      (*answers)[static_cast<size_t>(status.MPI_SOURCE)] = state.empty() ? "?" : state;
    }  // else an answer to an earlier question
  }
}

void CollectiveWatch::time_out(const char* op, double timeout_s, const std::function<bool()>& done,
                               const std::function<void()>& on_timeout) {
  ++question_;
  std::vector<std::string> answers(static_cast<size_t>(size_));
  answers[static_cast<size_t>(rank_)] = state_;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) send(r, kQuestionTag, question_);
  }
  const double patience = std::min(kMaxAnswerWaitSeconds, std::max(0.5, timeout_s));
  const auto start = std::chrono::steady_clock::now();
  auto answered = [&] {
    return std::count_if(answers.begin(), answers.end(), [](const auto& a) { return !a.empty(); });
  };
  while (answered() < size_ && seconds_since(start) < patience) {
    done();  // progress for MPI; the answer to this rank's own wait no longer matters
    collect(&answers);
    std::this_thread::yield();
  }
  if (on_timeout) on_timeout();
  throw CollectiveTimeout(describe(answers, timeout_s, op));
}

std::string CollectiveWatch::describe(const std::vector<std::string>& answers, double timeout_s,
                                      const char* op) const {
  std::vector<int> arrived;
  std::vector<int> silent;
  std::string elsewhere;
  for (int r = 0; r < size_; ++r) {
    const std::string& a = answers[static_cast<size_t>(r)];
    if (a == state_) {
      arrived.push_back(r);
    } else if (a.empty()) {
      silent.push_back(r);
    } else {
      elsewhere += "; rank " + std::to_string(r) + " waits in " + a + " instead";
    }
  }
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", timeout_s);
  std::string text = "collective " + state_ + " (" + backend_ + ", " + std::to_string(size_) +
                     " ranks) did not complete within the collective timeout of " + limit +
                     " s on rank " + std::to_string(rank_) + ": ";
  if (!silent.empty()) {
    text += rank_list(silent) +
            " did not arrive (no answer from inside a collective: computing, stopped, dead or "
            "unreachable)";
  } else {
    text += "no rank is missing from " + std::string(op);
  }
  return text + elsewhere + "; arrived: " + rank_list(arrived);
}

}  // namespace distcrown::collective::detail
