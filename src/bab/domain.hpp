#pragma once
// A β-CROWN branch-and-bound domain (relu_bab.cpp), and what travels between the domain groups of
// a branch and bound across ranks (domain_exchange.cpp): each rank's report before a round, the
// round's plan that every rank derives from the reports alone, and the domains that change group.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/attack.hpp"

namespace distcrown::bab::detail {

// One sub-domain. Per ReLU r (in graph order), tensors keep a batch dimension of 1 so batches are
// concatenations. Children share their parent's tensors except those a split or a bounding
// replaced, so a tensor is never written after it is stored.
struct Domain {
  std::vector<at::Tensor> lower, upper;  // bounds of ReLU r's input, [1, *shape]
  std::vector<at::Tensor> alpha;         // [K, 1, *shape]
  std::vector<at::Tensor> beta;          // [K, 1, *shape], >= 0, used where split != 0
  std::vector<at::Tensor> split;         // [1, *shape]: +1 inactive (z <= 0), -1 active, 0 free
  at::Tensor score;                      // [N_all] branching scores, < 0 = not splittable
  double value = -std::numeric_limits<double>::infinity();  // max_k (lb_k - rhs_k); -inf: unbounded
  /// A value known before bounding: the parent's (its region holds this one's), so that a
  /// child is never looser than its parent. -inf at the root.
  double floor = -std::numeric_limits<double>::infinity();
  // Ties in the queue go to the lowest id. The root is 0; the children of the domain at
  // position p of round t's plan get first_id(t) + 2p (inactive) and + 1 (active): the same ids
  // at every world size, so the global order of domains does not depend on the ranks.
  int64_t id = 0;
};

/// Heap order: the worst (lowest) value on top, then the lowest id.
inline bool worse_first(const Domain& a, const Domain& b) {
  return a.value != b.value ? a.value > b.value : a.id > b.id;
}

/// What one rank tells every other before a round.
struct RoundReport {
  bool timed_out = false;      // its (group-agreed) deadline passed, or a pass stopped at it
  bool exhausted = false;      // it dropped a domain with every unstable neuron split
  bool no_splittable = false;  // the root was not proved and the network has no ReLU to split
  std::optional<Counterexample> counterexample;  // found (and checked) in its last round
  int64_t queued = 0;                            // domains its group holds, candidates included
  int64_t bounded = 0;                           // domains its group has bounded so far
  /// (value, id) of its group's worst domains, at most a batch, worst first.
  std::vector<std::pair<double, int64_t>> candidates;
  /// The largest batch (BabOptions::batch's units) its memory limit allows next round; the round
  /// takes the smallest over every rank.
  int64_t batch_cap = std::numeric_limits<int64_t>::max();
  /// Not even the smallest batch fits under its memory limit (deterministic: the fixed one),
  /// with its live tensor bytes and limit then, for the reason every rank gives.
  bool memory_full = false;
  int64_t live_bytes = 0;
  int64_t limit_bytes = 0;
};

std::string encode_report(const RoundReport& r);
RoundReport decode_report(std::string_view bytes);

/// One domain of a round's plan: the position in the plan is its rank among all candidates
/// (worst first); `holder` is the group that has it, `bounder` the group that bounds it.
struct Planned {
  double value = 0;
  int64_t id = 0;
  int holder = 0;
  int bounder = 0;
};

/// The round's plan from the groups' reports (index = group): the `batch` worst candidates over
/// all groups, worst first (ties: lowest id), each bounded by its holder while that group has
/// fewer than ceil(n / groups), the rest by the groups with the fewest, lowest index first. The
/// same on every rank: a function of the reports alone.
std::vector<Planned> plan_round(const std::vector<RoundReport>& groups, int64_t batch);

/// A domain's tensors (CPU copies) and fields as bytes, and back with its tensors on `device`.
std::string encode_domain(const Domain& d);
Domain decode_domain(std::string_view bytes, const at::Device& device);

/// Domains tagged with their plan position, as one group's message.
std::string encode_moving(const std::vector<std::pair<int64_t, std::string>>& domains);
std::vector<std::pair<int64_t, std::string>> decode_moving(std::string_view bytes);

}  // namespace distcrown::bab::detail
