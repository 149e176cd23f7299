#pragma once
// Where a general split node's element is split (OpTraits::splits_anywhere), as GenBaB's
// optimised branching points (Shi et al., TACAS 2025): for each function, a table over input
// intervals [l, u] on a grid of [-5, 5] in steps of 0.1 holds the point p that minimises the
// area between the function's relaxation lines summed over the two children [l, p] and [p, u]
// (the relaxation the op's own backward() builds there, CROWN's, without α). The tables are
// computed when a search starts, by the op itself, for the functions defined on the whole grid
// (Sigmoid, Tanh, Erf, Exp, GELU, Sin, Cos); an interval outside the grid, narrower than a step,
// or of another function takes the midpoint (split_midpoint). Any point strictly inside [l, u]
// gives sound children: the choice only decides how much tighter they are.
#include <cstddef>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_graph.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// Branch point of one function over the grid's intervals: `ratio` [K, K] holds, for l = g_i and
/// u = g_j (i < j), (p − l)/(u − l) of the best point; the rest is unused.
class BranchPointTable {
 public:
  static constexpr double kLow = -5.0;
  static constexpr double kHigh = 5.0;
  static constexpr double kStep = 0.1;
  /// Interior points tried per interval: p = l + k/(kCandidates+1)·(u − l), k = 1..kCandidates.
  static constexpr int kCandidates = 31;

  /// Builds the table of `op` (an elementwise node of one input) in `dtype`; nullopt when its
  /// relaxation is not finite over the whole grid (a function defined on part of it).
  static std::optional<BranchPointTable> build(const BoundNode& op, at::ScalarType dtype);

  /// The table's ratio for [l, u], nullopt outside the grid or under one step wide.
  [[nodiscard]] std::optional<double> ratio(double l, double u) const;

  /// Summed area between the relaxation lines of both children [l, p], [p, u] ([M] each).
  static at::Tensor children_area(const BoundNode& op, const at::Tensor& l, const at::Tensor& p,
                                  const at::Tensor& u);

 private:
  explicit BranchPointTable(std::vector<double> ratio) : ratio_(std::move(ratio)) {}
  std::vector<double> ratio_;  // [K·K], row i = lower grid point
};

/// The branch points of a layout's general split nodes: one table per function (op type) that
/// has one, the midpoint for the rest.
class BranchPoints {
 public:
  BranchPoints(const BoundGraph& g, const ReluLayout& layout);
  /// The point strictly inside [l, u] (rounded to `dtype`) at which split node r's element is
  /// split, nullopt when none is (a few ulps wide).
  [[nodiscard]] std::optional<double> point(size_t r, double l, double u,
                                            at::ScalarType dtype) const;
  /// Whether split node r has a table (else the midpoint).
  [[nodiscard]] bool optimised(size_t r) const { return table_of_[r] >= 0; }

 private:
  std::vector<BranchPointTable> tables_;
  std::vector<int> table_of_;  // per split node: index into tables_, −1: midpoint
};

}  // namespace distcrown::bab::detail
