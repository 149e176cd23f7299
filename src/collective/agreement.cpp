#include "distcrown/collective/agreement.hpp"

#include <cstdio>
#include <cstdlib>

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
