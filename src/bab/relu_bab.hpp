#pragma once
// β-CROWN branch and bound with ReLU splits (Wang et al. 2021). A domain is the input box plus
// split decisions on unstable ReLU neurons (z ≤ 0 "inactive" or z ≥ 0 "active"; bab/split.hpp).
// Intermediate bounds come from α-CROWN at the root and stay fixed below it, except that a split
// neuron's interval is clamped to its side; the output bound of a domain is CROWN with
// per-domain α (inherited from the parent) and split multipliers β ≥ 0 (Lagrangian terms β·s·z
// added at the split neurons), optimised jointly by Adam. Domains are bounded in batches (the
// batch dimension of every tensor) and kept in a priority queue, worst bound first. Branching
// (bab/branching.hpp): BaBSR's scores, or FSB (the best candidates by BaBSR's two scores
// bounded once, the split whose worse (or better) child bounds best taken).
//
// The units (docs/architecture.md, "Branch and bound"): the round and the queue shared with
// input splitting (src/bab/round.hpp), the ReLU layout and its tensor-parallel views
// (relu_layout), the domains and their children (relu_domain), the bounding of a batch with the
// shared relaxation optimiser (relu_bounding, methods/relaxation_optimiser.hpp), the branching
// (relu_branching), the memory budget (memory_budget) and the exchange between ranks
// (domain_exchange).
#include <map>
#include <optional>
#include <vector>

#include "bab/split.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"

namespace distcrown::bab {

/// Lower bounds of C·y ([1, K]) over the part of `box` ([1, *input_shape]) where the splits
/// (ReLUs at 0) hold, as one branch-and-bound domain is bounded: intermediate bounds by CROWN on
/// the whole box, clamped at the split neurons; then options.iterations α/β optimisation steps
/// (with 0, one pass with CROWN's slopes and β = 0: the split neurons' relaxations alone).
at::Tensor split_domain_lower_bound(const BabOptions& options, const BoundGraph& g,
                                    const InputBox& box, const at::Tensor& C,
                                    const std::vector<Split>& splits);

/// Where a branch and bound starts: an α-CROWN run at the root (verify's, over every disjunct
/// at once): its intermediate bounds (by node; every ReLU input's is needed) and, for this
/// disjunct's rows, its output α (ReLU node -> [K, 1, *shape]).
struct RootStart {
  std::vector<std::optional<Interval>> intermediate;
  std::map<int, at::Tensor> output_alpha;
};

/// Proves `problem.objective` over the case's box, or finds a counterexample to any of its
/// disjuncts, or runs out of time/rounds. Starts from `start`, or from its own α-CROWN at the
/// root when null. Across ranks (context.world) every rank calls it together and gets the same
/// result; context.deadline must then be agreed over the rank's group.
BabResult relu_bab(const BabOptions& options, const RunContext& context, const BoundGraph& g,
                   const BabProblem& problem, const RootStart* start = nullptr);

}  // namespace distcrown::bab
