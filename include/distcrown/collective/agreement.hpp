#pragma once
// Keeping P ranks in step when something goes wrong. A rank that fails while the others wait in a
// collective would hang them, so the points where a user error can happen (loading files,
// options) end with an agreement: every rank reports its error or "", all ranks learn the first
// one, and all throw the same WorldError. Rank 0 prints it; everyone exits non-zero.
#include <cstdint>
#include <memory>
#include <string>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/util/deadline.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::collective {

/// An error known to every rank (the same message everywhere).
class WorldError : public Error {
 public:
  WorldError(const std::string& message, int failing_rank, bool printing_rank)
      : Error(message), failing_rank_(failing_rank), printing_rank_(printing_rank) {}
  [[nodiscard]] int failing_rank() const { return failing_rank_; }
  /// True on the one rank (rank 0) that should print it.
  [[nodiscard]] bool printing_rank() const { return printing_rank_; }

 private:
  int failing_rank_;
  bool printing_rank_;
};

/// Collective: throws WorldError on every rank when any rank's `local_error` is non-empty
/// (message of the lowest such rank, prefixed with "rank r: " when P > 1).
void agree_on_errors(Communicator& comm, const std::string& local_error);

/// Runs `fn` on this rank, then agrees on errors: either every rank returns normally or every
/// rank throws the same WorldError. A CollectiveTimeout passes through: the communicator can no
/// longer agree on anything.
template <class Fn>
void run_agreed(Communicator& comm, Fn&& fn) {
  std::string error;
  try {
    fn();
  } catch (const CollectiveTimeout&) {
    throw;
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  agree_on_errors(comm, error);
}

/// Collective: throws WorldError on every rank unless all ranks pass the same `fingerprint` of
/// what they loaded (model, property, options).
void check_same_inputs(Communicator& comm, const std::string& fingerprint);

/// Agreement on Deadline::expired() over `comm`'s ranks (Deadline::agreed_by): each call is one
/// host-side all-gather of a byte. Null for a single rank (nothing to agree on).
std::shared_ptr<ExpiryAgreement> expiry_agreement(const CommPtr& comm);

/// 64-bit FNV-1a of some bytes, hex; for fingerprints of files and options.
std::string fingerprint(const std::string& bytes);

}  // namespace distcrown::collective
