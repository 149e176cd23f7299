#include "bab/branch_points.hpp"

#include <array>
#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "bab/branching.hpp"

namespace distcrown::bab::detail {
namespace {

// The functions whose op type names one function on the whole grid (Pow, say, is one type for
// every exponent, and Reciprocal, Log, Sqrt are not defined on all of it).
constexpr std::array kTabulated{"Sigmoid", "Tanh", "Erf", "Exp", "Gelu", "Sin", "Cos"};

constexpr int64_t kGridPoints = 101;  // (kHigh − kLow) / kStep + 1

// Area between the relaxation lines that `op`'s backward() builds over [l, u] ([M] each): the
// lower line from a coefficient of +1 on the lower side, the upper line from +1 on the upper.
at::Tensor relaxation_area(const BoundNode& op, const at::Tensor& l, const at::Tensor& u) {
  const int64_t m = l.numel();
  const Interval in{l.reshape({m, 1}), u.reshape({m, 1})};  // [batch M, 1]
  const std::array<const Interval*, 1> bounds{&in};
  BoundA a{at::ones({1, m, 1}, l.options()), at::ones({1, m, 1}, l.options())};
  BiasPair bias;
  const std::vector<BoundA> out = op.backward(a, bounds, bias);
  const at::Tensor zero = at::zeros({m}, l.options());
  const at::Tensor slope_l = out.at(0).lA.reshape({m});
  const at::Tensor slope_u = out.at(0).uA.reshape({m});
  const at::Tensor icept_l = bias.lower.defined() ? bias.lower.reshape({m}) : zero;
  const at::Tensor icept_u = bias.upper.defined() ? bias.upper.reshape({m}) : zero;
  // ∫_l^u (upper − lower) dx for lines a·x + b.
  return (slope_u - slope_l) * (u * u - l * l) / 2 + (icept_u - icept_l) * (u - l);
}

}  // namespace

at::Tensor BranchPointTable::children_area(const BoundNode& op, const at::Tensor& l,
                                           const at::Tensor& p, const at::Tensor& u) {
  const int64_t m = l.numel();
  const at::Tensor both = relaxation_area(op, at::cat({l, p}), at::cat({p, u}));
  return both.slice(0, 0, m) + both.slice(0, m);
}

std::optional<BranchPointTable> BranchPointTable::build(const BoundNode& op, at::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor grid = at::arange(kGridPoints, opts) * kStep + kLow;    // [K]
  const at::Tensor pairs = at::triu_indices(kGridPoints, kGridPoints, 1);  // [2, P], i < j
  const at::Tensor lo = grid.index_select(0, pairs[0]).unsqueeze(1);       // [P, 1]
  const at::Tensor hi = grid.index_select(0, pairs[1]).unsqueeze(1);
  const at::Tensor t = at::arange(1, kCandidates + 1, opts) / double(kCandidates + 1);  // [T]
  const at::Tensor p = lo + t.unsqueeze(0) * (hi - lo);                                 // [P, T]
  at::Tensor area;
  try {
    area = children_area(op, lo.expand_as(p).reshape({-1}), p.reshape({-1}),
                         hi.expand_as(p).reshape({-1}))
               .view(p.sizes());
  } catch (const std::exception&) {
    return std::nullopt;  // a function the op refuses somewhere on the grid
  }
  if (!at::isfinite(area).all().item<bool>()) return std::nullopt;
  const at::Tensor best = t.index_select(0, area.argmin(1)).to(at::kDouble).contiguous();  // [P]
  std::vector<double> ratio(size_t(kGridPoints * kGridPoints), 0.5);
  const at::Tensor i = pairs[0].contiguous();
  const at::Tensor j = pairs[1].contiguous();
  for (int64_t k = 0; k < best.size(0); ++k) {
    ratio[size_t(i[k].item<int64_t>() * kGridPoints + j[k].item<int64_t>())] =
        best[k].item<double>();
  }
  return BranchPointTable(std::move(ratio));
}

std::optional<double> BranchPointTable::ratio(double l, double u) const {
  if (!(l >= kLow && u <= kHigh)) return std::nullopt;
  const auto i = int64_t(std::llround((l - kLow) / kStep));
  const auto j = int64_t(std::llround((u - kLow) / kStep));
  if (i >= j || i < 0 || j >= kGridPoints) return std::nullopt;
  return ratio_[size_t(i * kGridPoints + j)];
}

BranchPoints::BranchPoints(const BoundGraph& g, const ReluLayout& layout)
    : table_of_(layout.size(), -1) {
  std::vector<std::string> types;
  for (size_t r = 0; r < layout.size(); ++r) {
    if (!layout.general(r)) continue;
    const BoundNode& op = *g.node(layout.relu(r)).op;
    const std::string type = op.op_type();
    if (std::find(kTabulated.begin(), kTabulated.end(), type) == kTabulated.end()) continue;
    const auto seen = std::find(types.begin(), types.end(), type);
    if (seen != types.end()) {
      table_of_[r] = int(seen - types.begin());
      continue;
    }
    // In double whatever the graph's dtype: the table is one per function.
    std::optional<BranchPointTable> t = BranchPointTable::build(op, at::kDouble);
    if (!t) continue;
    types.push_back(type);
    tables_.push_back(std::move(*t));
    table_of_[r] = int(tables_.size()) - 1;
  }
}

std::optional<double> BranchPoints::point(size_t r, double l, double u,
                                          at::ScalarType dtype) const {
  if (table_of_[r] >= 0) {
    if (const std::optional<double> t = tables_[size_t(table_of_[r])].ratio(l, u)) {
      if (const std::optional<double> p = split_point_at(l, u, *t, dtype)) return p;
    }
  }
  return split_midpoint(l, u, dtype);
}

}  // namespace distcrown::bab::detail
