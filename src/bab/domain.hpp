#pragma once
// The domains of branch and bound: a β-CROWN domain (relu_bab.cpp) and an input sub-box
// (input_bab.cpp), and what travels between the domain groups of a branch and bound across ranks
// (domain_exchange.cpp): each rank's report before a round, the round's plan that every rank
// derives from the reports alone, and the domains that change group. Both searches share the
// round: report, exchange, plan, take the planned domains, bound their children.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/bab.hpp"

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

/// One input-splitting domain: a sub-box of the input region.
struct SubBox {
  // The box, flat over the input's elements, in double: values of the graph's dtype (exact), so
  // that halving and clipping make no tensor per box.
  std::vector<double> lower, upper;                         // [n]
  double value = -std::numeric_limits<double>::infinity();  // max_k (lb_k - rhs_k)
  int64_t split_dim = -1;  // where to halve it next (flat input index)
  // Ids as Domain's: the root 0, the halves of plan position p of a round first_id + 2p, + 1.
  int64_t id = 0;
  // The linear lower bounds of the rows' margins from the last bounding pass over a box that
  // contains this one, A·x + c: A [K, n] row-major, c [K]; empty before the first pass. They
  // clip the halves before bounding.
  std::vector<double> A, c;
};

/// Heap order of either kind of domain: the worst (lowest) value on top, then the lowest id.
struct WorseFirst {
  template <class D>
  bool operator()(const D& a, const D& b) const {
    return a.value != b.value ? a.value > b.value : a.id > b.id;
  }
};
inline constexpr WorseFirst worse_first{};

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

/// This group's report before a round: its candidates' (value, id), what it holds (the
/// candidates and `rest` more queued) and has bounded. Its flags stay as they are.
template <class D>
void report_candidates(RoundReport& mine, const std::vector<D>& candidates, size_t rest,
                       int64_t bounded) {
  mine.queued = int64_t(rest + candidates.size());
  mine.bounded = bounded;
  mine.candidates.clear();
  for (const D& d : candidates) mine.candidates.emplace_back(d.value, d.id);
}

/// What the gathered reports (index = group) say before a round, the same on every rank.
struct RoundTally {
  int64_t queued = 0;          // over every group
  bool exhausted = false;      // some group dropped a domain it could not split
  bool no_splittable = false;  // some group's root had nothing to split
  bool falsified = false;      // some group found a counterexample
  bool timed_out = false;      // some rank reached its deadline
};
/// The tally of `groups`; writes the world's counts into `res` (domains_bounded,
/// domains_per_group) and, when falsified, the lowest group's counterexample (with that group,
/// when found below the root: res.rounds > 0).
RoundTally tally_round(const std::vector<RoundReport>& groups, BabResult& res);

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
std::string encode_domain(const SubBox& b);
Domain decode_domain(std::string_view bytes, const at::Device& device);
SubBox decode_box(std::string_view bytes);

/// Domains tagged with their plan position, as one group's message.
std::string encode_moving(const std::vector<std::pair<int64_t, std::string>>& domains);
std::vector<std::pair<int64_t, std::string>> decode_moving(std::string_view bytes);

/// Every rank's report, as the groups' (their leaders'), with timed_out set on all of them when
/// any rank's is set, the smallest batch_cap of every rank, and the lowest full rank's memory.
/// Collective over the world; one process: {mine}.
std::vector<RoundReport> exchange_reports(const BabWorld& w, const RoundReport& mine);

/// The planned domains that change group, from every group's leader (`outgoing`: the plan
/// positions and encodings of those this group holds and another bounds), as (position, bytes)
/// for every group. Collective over the world.
std::vector<std::pair<int64_t, std::string>> move_planned(
    const BabWorld& w, const std::vector<std::pair<int64_t, std::string>>& outgoing);

/// The planned domains that this group bounds, in plan order with their plan positions: its own
/// candidates stay, the others arrive from their holders (`decode` makes one from its bytes);
/// candidates left out of the plan go back to the heap `queue`. `moved` counts every transfer.
template <class D, class Decode>
std::vector<std::pair<int64_t, D>> take_planned(const BabWorld& w, const std::vector<Planned>& plan,
                                                std::vector<D>& candidates, std::vector<D>& queue,
                                                const Decode& decode, int64_t& moved) {
  const int me = w.group_index();
  std::map<int64_t, int64_t> position;  // id -> plan position, for this group's candidates
  bool moves = false;
  for (size_t p = 0; p < plan.size(); ++p) {
    if (plan[p].holder == me) position[plan[p].id] = int64_t(p);
    moves = moves || plan[p].holder != plan[p].bounder;
  }
  std::vector<std::pair<int64_t, D>> mine;
  std::vector<std::pair<int64_t, std::string>> outgoing;
  for (D& d : candidates) {
    const auto it = position.find(d.id);
    if (it == position.end()) {
      queue.push_back(std::move(d));
      std::push_heap(queue.begin(), queue.end(), worse_first);
    } else if (plan[size_t(it->second)].bounder == me) {
      mine.emplace_back(it->second, std::move(d));
    } else if (w.group_leader()) {
      outgoing.emplace_back(it->second, encode_domain(d));
    }
  }
  candidates.clear();
  if (moves) {
    for (auto& [p, bytes] : move_planned(w, outgoing)) {
      ++moved;
      if (plan[size_t(p)].bounder == me) mine.emplace_back(p, decode(bytes));
    }
  }
  std::sort(mine.begin(), mine.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return mine;
}

}  // namespace distcrown::bab::detail
