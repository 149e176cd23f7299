#pragma once
// The α code that GELU (gelu.cpp) and Sin/Cos (trig.cpp) share, as auto_LiRPA's BoundGelu and
// BoundSin keep it: α holds several tangent points per neuron and side ([kEntries, B, *shape]),
// each initialised and projected onto its own range by the operator's plan, the neuron's case
// picking one entry per line. The operator gives `tangent_plan(in)` (init, lo, hi
// [kEntries, B, *shape] and what its lines need) and `lines(pre, alpha, plan)`; without α, its
// lines are CROWN's relaxation. Internal to ops/.
#include <span>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/graph/bound_node.hpp"
#include "elementwise_lines.hpp"

namespace distcrown::ops {

template <class Derived>
class TangentEntriesNode : public BoundNode {
 public:
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return self().tangent_plan(in).init;  // [kEntries, B, *shape]
  }

  void project_relaxation_params(at::Tensor& alpha, const Interval& in) const override {
    // alpha [2, rows, kEntries, B, *shape]; the ranges [kEntries, B, *shape] broadcast.
    const auto plan = self().tangent_plan(in);
    alpha.copy_(at::minimum(at::maximum(alpha, plan.lo), plan.hi));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    const Interval& pre = *bounds[0];
    const bool optimised = p.alpha_l.defined() || p.alpha_u.defined();
    using Plan = decltype(self().tangent_plan(pre));
    const Plan plan = optimised ? self().tangent_plan(pre) : Plan{};
    return {relax_elementwise(a, bias, p.alpha_l, p.alpha_u,
                              [&](const at::Tensor& t) { return self().lines(pre, t, plan); })};
  }

 private:
  TangentEntriesNode() = default;  // a base of Derived only
  friend Derived;
  [[nodiscard]] const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace distcrown::ops
