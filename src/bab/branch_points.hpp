#pragma once
// Where a general split node's element is split (OpTraits::splits_anywhere), as GenBaB's
// optimised branching points (Shi et al., TACAS 2025): for each function, a table over input
// intervals [l, u] on a grid of [-5, 5] in steps of 0.1 holds the point p that minimises the
// area between the function's relaxation lines summed over the two children [l, p] and [p, u]
// (the relaxation the op's own backward() builds there, CROWN's, without α). A table is kept for
// each function defined on the whole grid (Sigmoid, Tanh, Erf, Exp, GELU, Sin, Cos) and filled
// lazily: an interval's point is computed by the op itself the first time a split asks for it
// (one backward() over its 31 candidates; a search asks for few of the 5,050 intervals, and the
// whole table costs 0.4–9 s), always in the same batch, so the point does not depend on the order
// of the asks or on the layout. An interval outside the grid, narrower than a step, of another
// function, or whose relaxation is not finite takes the midpoint (split_midpoint). Any point
// strictly inside [l, u] gives sound children: the choice only decides how much tighter they are.
#include <cstddef>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_graph.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// Branch point of one function over the grid's intervals: `ratio_` [K, K] holds, for l = g_i and
/// u = g_j (i < j), (p − l)/(u − l) of the best point once computed (NaN before, kNone where the
/// relaxation is not finite); the rest is unused.
class BranchPointTable {
 public:
  static constexpr double kLow = -5.0;
  static constexpr double kHigh = 5.0;
  static constexpr double kStep = 0.1;
  /// Interior points tried per interval: p = l + k/(kCandidates+1)·(u − l), k = 1..kCandidates.
  static constexpr int kCandidates = 31;

  /// The table of `op` (an elementwise node of one input, which must outlive the table), empty.
  explicit BranchPointTable(const BoundNode& op);

  /// The table's ratio for [l, u], computed in double on the first ask; nullopt outside the grid,
  /// under one step wide, or where the op's relaxation is not finite.
  [[nodiscard]] std::optional<double> ratio(double l, double u);

  /// Summed area between the relaxation lines of both children [l, p], [p, u] ([M] each).
  static at::Tensor children_area(const BoundNode& op, const at::Tensor& l, const at::Tensor& p,
                                  const at::Tensor& u);

 private:
  static constexpr double kNone = -1.0;
  // The best of the candidates for grid interval (i, j), kNone where an area is not finite.
  [[nodiscard]] double best_ratio(int64_t i, int64_t j) const;

  const BoundNode* op_;        // not owned: a node of the graph under search
  std::vector<double> ratio_;  // [K·K], row i = lower grid point
};

/// The branch points of a layout's general split nodes: one table per function (op type) that
/// has one, the midpoint for the rest.
class BranchPoints {
 public:
  BranchPoints(const BoundGraph& g, const ReluLayout& layout);
  /// The point strictly inside [l, u] (rounded to `dtype`) at which split node r's element is
  /// split, nullopt when none is (a few ulps wide). Not const: fills the tables.
  [[nodiscard]] std::optional<double> point(size_t r, double l, double u, at::ScalarType dtype);
  /// Whether split node r has a table (else the midpoint).
  [[nodiscard]] bool optimised(size_t r) const { return table_of_[r] >= 0; }

 private:
  std::vector<BranchPointTable> tables_;
  std::vector<int> table_of_;  // per split node: index into tables_, −1: midpoint
};

}  // namespace distcrown::bab::detail
