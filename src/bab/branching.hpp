#pragma once
// Which unstable ReLU neuron a β-CROWN domain is split on: BaBSR's scores (Bunel et al. 2020) as
// α,β-CROWN computes them (complete_verifier/heuristics/babsr.py), and the candidates that FSB
// (filtered smart branching, kfsb.py) bounds before it decides.
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown::bab {

/// BaBSR's two estimates for every neuron of one ReLU, from the last bounding pass of a batch of
/// B domains with K rows. A [K, B, N]: each row's coefficients on the ReLU's output; lower, upper
/// [B, N]: the ReLU input's bounds; bias [1, N]: the constant term of the affine node that feeds
/// the ReLU (zeros where none is known). With the upper line's slope s = u⁺/(u⁺ − l⁻) and its
/// intercept t = −l⁻·s, per row k:
///   intercept_k = min(A_k, 0)·t                          (what the upper line's intercept costs)
///   score_k     = |reduce(b·A_k·(s − 1), b·A_k·s) + intercept_k|
/// reduce = max when `take_max`, else min (α,β-CROWN's branching reduceop); then each the mean
/// over the rows, weighted by row_weight [K, B, 1] (1 where the row still matters on the domain).
/// A stable neuron (u ≤ 0 or l ≥ 0) scores 0 in both.
struct BabsrScores {
  at::Tensor score;      // [B, N], >= 0, larger first
  at::Tensor intercept;  // [B, N], <= 0, more negative first
};
BabsrScores babsr_scores(const at::Tensor& A, const at::Tensor& row_weight, const at::Tensor& lower,
                         const at::Tensor& upper, const at::Tensor& bias, bool take_max);

/// A point to split a general split node's element at (OpTraits::splits_anywhere):
/// l + ratio·(u − l) for a ratio in (0, 1), rounded to `dtype`, when it lies strictly inside
/// [l, u]; nullopt when it does not (the interval is a few ulps wide).
std::optional<double> split_point_at(double l, double u, double ratio, at::ScalarType dtype);
/// The midpoint's (ratio 0.5): nullopt means nothing is left to split.
std::optional<double> split_midpoint(double l, double u, at::ScalarType dtype);

/// Scores of a general split node's neurons, in the units of BaBSR's: A [K, B, N] the rows'
/// coefficients on the node's output, row_weight [K, B, 1] as babsr_scores', lower/upper [B, N]
/// its input's bounds, height [B, N] the width of the node's IBP output over them. A
/// relaxation of the function over [l, u] lies within `height` of it; halving the interval
/// roughly halves the height on each side, so the bound gains about
///   score = mean_k(w_k·|A_k|) · height / 4
/// (a ReLU over [−a, a] gives a/4 where BaBSR's intercept term gives a/2). Neurons whose
/// midpoint is not strictly inside (split_midpoint) score kUnsplittable.
at::Tensor general_scores(const at::Tensor& A, const at::Tensor& row_weight,
                          const at::Tensor& lower, const at::Tensor& upper,
                          const at::Tensor& height);

/// The score rows a domain keeps ([2, N_all]): row 0 BaBSR's score, row 1 the negated
/// intercept score (so both are larger-first); a neuron that cannot be split holds -1 in both.
inline constexpr double kUnsplittable = -1.0;

/// Below these, α,β-CROWN treats a score as carrying no information (babsr.py, kfsb.py).
inline constexpr double kScoreInformative = 1e-3;      // BaBSR's score, greedy branching
inline constexpr double kCandidateInformative = 1e-4;  // either score, FSB's candidates

/// BaBSR's greedy choice from one domain's scores ([2, N_all]): the best score when it is
/// informative, else the best intercept score when that is, else the best score (the neuron
/// order's tie-break). -1 when no neuron can be split.
int64_t babsr_choice(const at::Tensor& scores);

/// FSB's candidates from one domain's scores ([2, N_all]): the k best by each score that are
/// informative, without repeats, best score first; when neither gives one, babsr_choice's (none
/// when nothing can be split).
std::vector<int64_t> fsb_candidates(const at::Tensor& scores, int k);

}  // namespace distcrown::bab
