// bab/branching.hpp: BaBSR's scores against a hand computation of α,β-CROWN's formulas, and the
// choices that greedy BaBSR and FSB make from them.
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "bab/branching.hpp"

namespace distcrown::bab {
namespace {

at::Tensor t(const std::vector<double>& v, const std::vector<int64_t>& shape) {
  return at::tensor(v, at::kDouble).reshape(shape);
}

// One row, one unstable neuron: l = −1, u = 3, bias 0.5, A = −2. Slope s = 3/4, intercept
// t = 3/4: intercept score −2·3/4 = −1.5; b·A = −1, so the bias estimates are −1·(s − 1) = 0.25
// and −1·s = −0.75, and the score is |min + (−1.5)| = 2.25 or |max + (−1.5)| = 1.25.
TEST(BabsrScores, MatchTheHandComputation) {
  const at::Tensor A = t({-2.0}, {1, 1, 1});
  const at::Tensor w = t({1.0}, {1, 1, 1});
  const at::Tensor l = t({-1.0}, {1, 1});
  const at::Tensor u = t({3.0}, {1, 1});
  const at::Tensor b = t({0.5}, {1, 1});
  const BabsrScores lo = babsr_scores(A, w, l, u, b, false);
  EXPECT_DOUBLE_EQ(lo.intercept.item<double>(), -1.5);
  EXPECT_DOUBLE_EQ(lo.score.item<double>(), 2.25);
  const BabsrScores hi = babsr_scores(A, w, l, u, b, true);
  EXPECT_DOUBLE_EQ(hi.intercept.item<double>(), -1.5);
  EXPECT_DOUBLE_EQ(hi.score.item<double>(), 1.25);
  // A positive coefficient takes the lower line: no intercept; the score is the bias term alone
  // (b·A = 1: estimates −0.25 and 0.75).
  const BabsrScores pos = babsr_scores(-A, w, l, u, b, false);
  EXPECT_DOUBLE_EQ(pos.intercept.item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(pos.score.item<double>(), 0.25);
}

// Stable neurons score 0; the rows are averaged with their weights (a row proved on the domain,
// weight 0, does not count).
TEST(BabsrScores, StableNeuronsScoreZeroAndRowsAreWeighted) {
  // Neurons: unstable (−1, 3), inactive (−2, −1), active (1, 2). Rows: A = −2 and A = −4.
  const at::Tensor A = t({-2.0, -2.0, -2.0, -4.0, -4.0, -4.0}, {2, 1, 3});
  const at::Tensor l = t({-1.0, -2.0, 1.0}, {1, 3});
  const at::Tensor u = t({3.0, -1.0, 2.0}, {1, 3});
  const at::Tensor b = at::zeros({1, 3}, at::kDouble);
  const BabsrScores both = babsr_scores(A, t({1.0, 1.0}, {2, 1, 1}), l, u, b, false);
  EXPECT_DOUBLE_EQ(both.intercept[0][0].item<double>(), -(1.5 + 3.0) / 2);
  EXPECT_DOUBLE_EQ(both.score[0][0].item<double>(), (1.5 + 3.0) / 2);
  for (int64_t j : {1, 2}) {
    EXPECT_EQ(both.intercept[0][j].item<double>(), 0.0);
    EXPECT_EQ(both.score[0][j].item<double>(), 0.0);
  }
  const BabsrScores first = babsr_scores(A, t({1.0, 0.0}, {2, 1, 1}), l, u, b, false);
  EXPECT_DOUBLE_EQ(first.intercept[0][0].item<double>(), -1.5);
}

// Scores as a domain keeps them: row 0 BaBSR's score, row 1 the negated intercept score.
at::Tensor kept(const std::vector<double>& score, const std::vector<double>& intercept) {
  const auto n = int64_t(score.size());
  return at::stack({t(score, {n}), t(intercept, {n})});
}

TEST(BabsrChoice, ScoreThenInterceptThenTheOrder) {
  EXPECT_EQ(babsr_choice(kept({0.1, 0.5, 0.2}, {0.9, 0.0, 0.0})), 1);
  // No informative score (all ≤ 1e-3): the best intercept score.
  EXPECT_EQ(babsr_choice(kept({1e-4, 5e-4, 2e-4}, {0.0, 0.0, 0.3})), 2);
  // Neither: the best (tie-broken) score.
  EXPECT_EQ(babsr_choice(kept({1e-9, 5e-9, 2e-9}, {0.0, 0.0, 0.0})), 1);
  EXPECT_EQ(babsr_choice(kept({kUnsplittable, kUnsplittable}, {kUnsplittable, kUnsplittable})), -1);
}

TEST(FsbCandidates, TheBestOfBothScoresWithoutRepeats) {
  const at::Tensor s =
      kept({0.9, 0.8, 0.0, 0.1, kUnsplittable}, {0.0, 0.7, 0.6, 0.0, kUnsplittable});
  EXPECT_EQ(fsb_candidates(s, 2), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(fsb_candidates(s, 1), (std::vector<int64_t>{0, 1}));
  // Uninformative scores are not candidates; with none at all, BaBSR's choice.
  EXPECT_EQ(fsb_candidates(kept({0.5, 1e-5}, {1e-5, 0.0}), 2), (std::vector<int64_t>{0}));
  EXPECT_EQ(fsb_candidates(kept({1e-9, 3e-9}, {0.0, 0.0}), 3), (std::vector<int64_t>{1}));
  EXPECT_TRUE(fsb_candidates(kept({kUnsplittable}, {kUnsplittable}), 3).empty());
}

}  // namespace
}  // namespace distcrown::bab
