#pragma once
// The shared kit of the monotone elementwise operators whose relaxation is a chord and one tangent
// line, with α-CROWN optimising the tangent point per neuron (convex.cpp: Exp, Reciprocal;
// power.cpp: Sqrt). A subclass gives f (apply), its direction, its domain check and its lines for
// a tangent point; the kit does the rest as auto_LiRPA's BoundExp / BoundReciprocal / BoundSqrt:
//   input floor  where the input has a known floor (GraphBuilder::known_floor) the input interval
//                is clamped there first: every real input satisfies it, while CROWN's intermediate
//                bounds (not intersected with IBP) may reach below
//   IBP          [f(l), f(u)] (swapped when non-increasing) on the floored, checked interval
//   α            P = [batch, *shape], initialised at the midpoint (l + u)/2 and projected onto
//                [l, u] before each use
// Internal to ops/.
#include <optional>

#include "elementwise_lines.hpp"
#include "ops/monotone.hpp"

namespace distcrown::ops {

class TangentPointElementwise : public MonotoneElementwise {
 public:
  [[nodiscard]] OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splits_anywhere = true};
  }
  [[nodiscard]] Interval ibp(std::span<const Interval* const> x) const override;
  [[nodiscard]] std::vector<BoundA> backward(const BoundA& a,
                                             std::span<const Interval* const> bounds,
                                             BiasPair& bias) const override;
  [[nodiscard]] at::Tensor initial_relaxation_params(const Interval& given) const override;
  void project_relaxation_params(at::Tensor& alpha, const Interval& given) const override;
  [[nodiscard]] std::vector<BoundA> backward_relaxed(const BoundA& a,
                                                     std::span<const Interval* const> bounds,
                                                     BiasPair& bias,
                                                     const RelaxParams& p) const override;

 protected:
  /// `input_floor`: a known lower bound of the input (none: the bounds are used as given).
  TangentPointElementwise(Direction direction, std::optional<double> input_floor)
      : MonotoneElementwise(direction), floor_(input_floor) {}

  [[nodiscard]] const std::optional<double>& input_floor() const { return floor_; }

  /// Throws NumericError where the (floored) interval leaves f's domain.
  virtual void require_domain(const Interval& in) const = 0;
  /// The lines on the floored bounds `pre`, with the tangent point `t` ([B, *shape] or
  /// [rows, B, *shape], projected) or CROWN's choice when undefined.
  [[nodiscard]] virtual ElementwiseLines lines(const Interval& pre, const at::Tensor& t) const = 0;

 private:
  // The input bounds clamped at the known floor (unchanged without one).
  [[nodiscard]] Interval floored(const Interval& in) const;

  std::optional<double> floor_;
};

}  // namespace distcrown::ops
