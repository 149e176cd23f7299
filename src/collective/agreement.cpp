#include "distcrown/collective/agreement.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace distcrown::collective {

void agree_on_errors(Communicator& comm, const std::string& local_error) {
  const std::vector<std::string> all = comm.all_gather_strings(local_error);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    const std::string prefix = comm.size() > 1 ? "rank " + std::to_string(r) + ": " : "";
    throw WorldError(prefix + all[r], int(r), comm.rank() == 0);
  }
}

void check_same_inputs(Communicator& comm, const std::string& fp) {
  const std::vector<std::string> all = comm.all_gather_strings(fp);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      throw WorldError("rank " + std::to_string(r) +
                           " loaded a different model, property or options than rank 0 "
                           "(fingerprints " +
                           all[r] + " vs " + all[0] + "); refusing to run",
                       int(r), comm.rank() == 0);
    }
  }
}

namespace {

// Checkpoints between which one of every kCheckpointStride communicates. They come every few
// microseconds to milliseconds in step on every rank; 16 keeps a rank's overshoot at tens of
// milliseconds while an all-gather per checkpoint cost ~40 % of a two-rank branch and bound on
// this 2-core VM.
constexpr int64_t kCheckpointStride = 16;

class CommExpiryAgreement final : public ExpiryAgreement {
 public:
  explicit CommExpiryAgreement(CommPtr comm) : comm_(std::move(comm)) {}
  bool any(bool local, bool exact) override {
    if (!exact && ++checkpoints_ % kCheckpointStride != 0) return false;
    for (const std::string& s : comm_->all_gather_strings(local ? "1" : "0")) {
      if (s == "1") return true;
    }
    return false;
  }

 private:
  CommPtr comm_;
  int64_t checkpoints_ = 0;  // the same count on every rank: they call in step
};

}  // namespace

std::shared_ptr<ExpiryAgreement> expiry_agreement(const CommPtr& comm) {
  if (!comm || comm->size() == 1) return nullptr;
  return std::make_shared<CommExpiryAgreement>(comm);
}

std::string fingerprint(const std::string& bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace distcrown::collective
