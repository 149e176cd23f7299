#pragma once
// Which split each parent domain of a round gets (bab/branching.hpp's heuristics applied to a
// batch): BaBSR's greedy choice, or FSB's: both children of each candidate bounded once without
// optimisation, and the candidate whose worse (BranchingReduce::kMax: better) child bounds best
// kept.
#include <cstdint>
#include <vector>

#include "bab/branch_points.hpp"
#include "bab/split.hpp"
#include "distcrown/bab/bab.hpp"
#include "domain.hpp"
#include "relu_bounding.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// One split per parent, in order. `holders`: the units that hold domains in the round exchange
/// (groups, or ranks under spec-parallel): FSB's trials are bounded in pieces no larger than the
/// children of one holder's share of a `batch`. Under spec-parallel, collective over the group
/// (FSB's trial passes), also on a rank without parents. A general node's element is split at
/// `points`' point.
std::vector<Split> choose_splits(const std::vector<Domain>& parents, int64_t batch, int holders,
                                 const BabOptions& options, const ReluLayout& layout,
                                 BranchPoints& points, DomainBounder& bounder);

}  // namespace distcrown::bab::detail
