#pragma once
// Cuts from verified subproblems (BICCOS's base form, Zhou et al., NeurIPS 2024): when branch
// and bound proves a domain, the conjunction of its ReLU split decisions holds no violation of
// the property. Dropping the decisions whose β the proof did not use and proving the reduced
// conjunction again (relu_bab.cpp) gives a shorter one, a *nogood*: every point of the input box
// where all of its decisions hold satisfies the property. The pool applies each nogood to the
// domains of later rounds as a clause: a domain inside every decision of a nogood is proved
// without a pass (pruned), and a domain inside all but one of them holds its violations only on
// the other side of that one, which becomes a split of the domain (unit propagation: a neuron
// fixed without branching). Decisions are read from a domain's bounds, not only its splits: a
// neuron whose interval lies on one side of 0 satisfies that side's decision.
#include <cstdint>
#include <vector>

#include "bab/split.hpp"
#include "domain.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// One ReLU decision: neuron `neuron` (flat over every entry of the layout, in entry order,
/// each entry's whole input) is active (side +1: z >= 0) or inactive (side -1: z <= 0).
struct Decision {
  int64_t neuron = 0;
  int8_t side = 0;
  friend bool operator==(const Decision&, const Decision&) = default;
  friend auto operator<=>(const Decision&, const Decision&) = default;
};

/// What the pool says of one domain.
struct Propagation {
  bool pruned = false;         // inside a nogood: proved
  std::vector<Split> implied;  // splits the nogoods force on it, in the order found
};

class CutPool {
 public:
  /// Over `layout`'s entries shaped as `root`'s; only ReLU entries carry decisions (a layout
  /// with general split nodes has no cuts: relu_bab.cpp does not learn there).
  CutPool(const ReluLayout& layout, const Domain& root);

  /// The split decisions of `d`, sorted; with `used_only` those whose β is positive in some
  /// row of `d` (the ones its bound used).
  [[nodiscard]] std::vector<Decision> decisions(const Domain& d, bool used_only = false) const;
  /// The root `root` with `ds`'s decisions as splits (its α and β replaced by `warm`'s, the
  /// proved domain's, as the optimisation's start).
  [[nodiscard]] Domain domain_of(const Domain& root, const std::vector<Decision>& ds,
                                 const Domain& warm) const;

  /// Adds a nogood (sorted, non-empty); a duplicate is ignored.
  void add(std::vector<Decision> nogood);
  [[nodiscard]] size_t size() const { return nogoods_.size(); }

  /// Unit propagation of every nogood over `d`'s decisions (its bounds' signs) to a fixpoint.
  [[nodiscard]] Propagation propagate(const Domain& d) const;

 private:
  /// Per neuron: +1 (interval >= 0), -1 (<= 0), 0 (across 0).
  [[nodiscard]] std::vector<int8_t> signs(const Domain& d) const;
  [[nodiscard]] Split split_of(int64_t neuron, int8_t side) const;

  const ReluLayout& layout_;
  std::vector<int64_t> offset_;  // first flat neuron of each entry; back(): the total
  std::vector<std::vector<Decision>> nogoods_;
};

}  // namespace distcrown::bab::detail
