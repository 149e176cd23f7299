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

BranchPointTable::BranchPointTable(const BoundNode& op)
    : op_(&op), ratio_(size_t(kGridPoints * kGridPoints), std::nan("")) {}

double BranchPointTable::best_ratio(int64_t i, int64_t j) const {
  c10::NoGradGuard no_grad;
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const double lo = kLow + double(i) * kStep;
  const double hi = kLow + double(j) * kStep;
  const at::Tensor t = at::arange(1, kCandidates + 1, opts) / double(kCandidates + 1);  // [T]
  const at::Tensor l = at::full({kCandidates}, lo, opts);
  const at::Tensor u = at::full({kCandidates}, hi, opts);
  at::Tensor area;
  try {
    area = children_area(*op_, l, l + t * (hi - lo), u);  // [T]
  } catch (const std::exception&) {
    return kNone;  // a function the op refuses on this interval
  }
  if (!at::isfinite(area).all().item<bool>()) return kNone;
  return t[area.argmin().item<int64_t>()].item<double>();
}

std::optional<double> BranchPointTable::ratio(double l, double u) {
  if (!(l >= kLow && u <= kHigh)) return std::nullopt;
  const auto i = int64_t(std::llround((l - kLow) / kStep));
  const auto j = int64_t(std::llround((u - kLow) / kStep));
  if (i >= j || i < 0 || j >= kGridPoints) return std::nullopt;
  double& r = ratio_[size_t(i * kGridPoints + j)];
  if (std::isnan(r)) r = best_ratio(i, j);
  if (r < 0) return std::nullopt;
  return r;
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
    if (seen == types.end()) {
      types.push_back(type);
      tables_.emplace_back(op);  // one per function: the first node of its type computes it
    }
    table_of_[r] = int(std::find(types.begin(), types.end(), type) - types.begin());
  }
}

std::optional<double> BranchPoints::point(size_t r, double l, double u, at::ScalarType dtype) {
  if (table_of_[r] >= 0) {
    if (const std::optional<double> t = tables_[size_t(table_of_[r])].ratio(l, u)) {
      if (const std::optional<double> p = split_point_at(l, u, *t, dtype)) return p;
    }
  }
  return split_midpoint(l, u, dtype);
}

}  // namespace distcrown::bab::detail
