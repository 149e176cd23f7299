#pragma once
// Branch and bound by input splitting, for networks with few inputs (ACAS Xu: 5): a domain is a
// sub-box; a batch of sub-boxes is bounded by CROWN in one call (every intermediate bound
// recomputed on each sub-box, so splitting tightens everything); each bounded box is clipped to
// the region where its rows' linear bounds allow a counterexample (clip_to_violations); the split
// dimension maximises input_split_scores and the box is halved there. Under mpirun the domain
// groups of BabOptions::world share each round's boxes as ReLU branch and bound shares its
// domains (src/bab/domain.hpp): the same boxes and ids at every layout.
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown::bab {

/// Boxes shrunk to where a counterexample can be (α,β-CROWN's input clipping): a counterexample
/// x satisfies every row k of a disjunct, so A_k·x + c_k <= 0 for the linear lower bounds of the
/// rows' margins; each box is cut, dimension by dimension, to the bounding box of those
/// half-spaces within it. lower/upper [B, n], A [B, K, n], linear_gap [B, K] (the minimum of
/// A_k·x + c_k over the box), double. `empty` [B]: no point of the box satisfies them all.
/// A slack of 1e-5 of the bound's largest term keeps the float32 rounding of the bound sound.
struct ClippedBoxes {
  at::Tensor lower, upper;  // [B, n], inside the given boxes (empty boxes: unchanged)
  at::Tensor empty;         // [B] bool
};
ClippedBoxes clip_to_violations(const at::Tensor& lower, const at::Tensor& upper,
                                const at::Tensor& A, const at::Tensor& linear_gap, int passes = 2);

/// The score of halving each input dimension of each box (the largest is split): the looseness
/// Σ_k |A_ki|·radius_i that dimension adds to the rows' linear bounds (α,β-CROWN's "sb" input
/// split score, summed over the rows), A [B, K, n], radius [B, n]; plus, where the box's best
/// row (the largest gap, gap [B, K] = lower bound − threshold) misses its threshold by more than
/// its linear bound's whole spread Σ_i |A_ki|·radius_i, a tenth (kDeficitShare) of that deficit
/// times the fraction of its root width each dimension still spans, radius_i / root_radius_i
/// (root_radius [n]). Such a gap is the relaxations' looseness, which the linear bound does not
/// attribute to any input (its A_i can be ≈ 0 for a dimension whose width makes the ReLUs
/// unstable), and halving by A alone then shrinks the other dimensions to ulps (ACAS Xu 1_4
/// property 1 stalled at −13.82 for 260,000 boxes so). Returns [B, n]. (A predicted gain of the
/// worse half, which prefers dimensions where rows pull opposite ways, needed more boxes on the
/// ACAS Xu fixtures: docs/archive/results-2026.md.)
inline constexpr double kDeficitShare = 0.1;
at::Tensor input_split_scores(const at::Tensor& A, const at::Tensor& radius, const at::Tensor& gap,
                              const at::Tensor& root_radius);

/// Proves `problem.objective` over the case's box by halving sub-boxes, or finds a
/// counterexample, or runs out of time/rounds (options.bound: the passes' options). Across ranks
/// (context.world) as relu_bab().
BabResult input_bab(const BabOptions& options, const RunContext& context, const BoundGraph& g,
                    const BabProblem& problem);

}  // namespace distcrown::bab
