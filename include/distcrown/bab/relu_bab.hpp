#pragma once
// β-CROWN branch and bound with ReLU splits (Wang et al. 2021). A domain is the input box plus
// split decisions on unstable ReLU neurons (z ≤ 0 "inactive" or z ≥ 0 "active"). Intermediate
// bounds come from α-CROWN at the root and stay fixed below it, except that a split neuron's
// interval is clamped to its side; the output bound of a domain is CROWN with per-domain α
// (inherited from the parent) and split multipliers β ≥ 0 (Lagrangian terms β·s·z added at the
// split neurons), optimised jointly by Adam. Domains are bounded in batches (the batch dimension of
// every tensor) and kept in a priority queue, worst bound first. Branching (bab/branching.hpp):
// BaBSR's scores, or FSB (the best candidates by BaBSR's two scores bounded once, the split whose
// worse (or better) child bounds best taken).
#include <map>
#include <optional>
#include <vector>

#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown::bab {

/// Bytes the queued domains hold, by kind (the memory benchmark's breakdown), at the round where
/// their total peaked.
struct DomainStoreBytes {
  int64_t alpha = 0;
  int64_t beta = 0;
  int64_t bounds = 0;  // intermediate bounds (lower and upper)
  int64_t other = 0;   // split decisions and branching scores
  [[nodiscard]] int64_t total() const { return alpha + beta + bounds + other; }
};

struct ReluBabStats {
  DomainStoreBytes peak_store;
};

/// A split decision on one ReLU neuron: its input z is <= 0 (inactive) or >= 0 (active).
struct NeuronSplit {
  int relu_node = 0;   // graph index of the ReLU
  int64_t neuron = 0;  // flat index into the ReLU's input (batch excluded)
  bool active = false;
};

/// Lower bounds of C·y ([1, K]) over the part of `box` ([1, *input_shape]) where the splits hold,
/// as one branch-and-bound domain is bounded: intermediate bounds by CROWN on the whole box,
/// clamped at the split neurons; then `iterations` α/β optimisation steps (with 0, one pass with
/// CROWN's slopes and β = 0: the split neurons' relaxations alone).
at::Tensor split_domain_lower_bound(const BoundGraph& g, const InputBox& box, const at::Tensor& C,
                                    const std::vector<NeuronSplit>& splits, int iterations,
                                    const BabOptions& options = {},
                                    const BoundOptions& bound_options = {});

/// Where a branch and bound starts: an α-CROWN run at the root (verify's, over every disjunct
/// at once): its intermediate bounds (by node; every ReLU input's is needed) and, for this
/// disjunct's rows, its output α (ReLU node -> [K, 1, *shape]).
struct RootStart {
  std::vector<std::optional<Interval>> intermediate;
  std::map<int, at::Tensor> output_alpha;
};

/// Proves `objective` over the case's box, or finds a counterexample to any of `disjuncts` (all of
/// the case's, for the attacks), or runs out of time/rounds. Starts from `start`, or from its own
/// α-CROWN at the root when null. Across ranks (options.world) every rank calls it together and
/// gets the same result; `deadline` must then be agreed over the rank's group
/// (Deadline::agreed_by), the rounds agreeing over the world themselves.
BabResult relu_bab(const BoundGraph& g, const io::VnnlibCase& c, const Objective& objective,
                   const std::vector<Objective>& disjuncts, const BabOptions& options,
                   const Deadline& deadline, const BoundOptions& bound_options = {},
                   ReluBabStats* stats = nullptr, const RootStart* start = nullptr);

}  // namespace distcrown::bab
