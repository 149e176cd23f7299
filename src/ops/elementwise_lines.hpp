#pragma once
// Linear bounds k·x + b on an elementwise y = f(x), per neuron, and the CROWN step through them:
// the shared core of the nonlinear elementwise operators whose relaxation is a pair of lines
// (s_shaped.cpp: Sigmoid, Tanh, Erf; convex.cpp: Exp, Reciprocal; power.cpp: Pow, Sqrt;
// trig.cpp: Sin, Cos). Internal to ops/.
#include <ATen/ATen.h>

#include <limits>
#include <utility>

#include "distcrown/bounds/interval.hpp"

namespace distcrown::ops {

/// lower_k·x + lower_b ≤ f(x) ≤ upper_k·x + upper_b on the neuron's input interval. Each tensor
/// is [batch, *shape] (CROWN) or [rows, batch, *shape] (α per spec row).
struct ElementwiseLines {
  at::Tensor lower_k, lower_b, upper_k, upper_b;
};

/// The chord of f on [l, u] (f(l) = fl, f(u) = fu): slope and intercept, per neuron. The slope is
/// (fu − fl)/(u − l) with u − l clamped at 1e-8, so 0 where l = u (the constant f(l)).
inline std::pair<at::Tensor, at::Tensor> chord(const at::Tensor& l, const at::Tensor& u,
                                               const at::Tensor& fl, const at::Tensor& fu) {
  const at::Tensor k = (fu - fl) / (u - l).clamp_min(1e-8);
  return {k, fl - k * l};
}

/// The tangent of f at t (f(t) = ft, f'(t) = dft): slope and intercept, per neuron.
inline std::pair<at::Tensor, at::Tensor> tangent_line(const at::Tensor& t, const at::Tensor& ft,
                                                      const at::Tensor& dft) {
  return {dft, ft - dft * t};
}

/// One side of the CROWN step: A [S, B, *shape] -> A⁺·k_pos + A⁻·k_neg, adding
/// A⁺·b_pos + A⁻·b_neg into `bias` ([S, B]). The lower side passes the lower line as `pos`, the
/// upper side the upper line, and `unbounded` −inf (upper: +inf): the bias of a row that has a
/// coefficient on a neuron whose line is not finite, read when `may_overflow` (functions whose
/// lines can leave the dtype's range on a finite interval: exp, powers, reciprocals).
at::Tensor relax_elementwise_side(const at::Tensor& A, const at::Tensor& k_pos,
                                  const at::Tensor& b_pos, const at::Tensor& k_neg,
                                  const at::Tensor& b_neg, at::Tensor& bias, double unbounded,
                                  bool may_overflow);

/// Adds `unbounded` (−inf on the lower side, +inf on the upper) into the bias [S, B] (`dtype`) of
/// the rows that have a coefficient on an element whose relaxation is not finite (`lost`
/// [S, B, *shape]): no A passes through such an element, so nothing else bounds those rows.
void bound_lost_rows(at::Tensor& bias, const at::Tensor& lost, double unbounded,
                     at::ScalarType dtype);

/// The CROWN step for both sides, with `lines_for(alpha)` giving the lines of one side from its
/// α (undefined: CROWN's choice); `may_overflow` as relax_elementwise_side's.
template <class LinesFor>
BoundA relax_elementwise(const BoundA& a, BiasPair& bias, const at::Tensor& alpha_l,
                         const at::Tensor& alpha_u, LinesFor&& lines_for,
                         bool may_overflow = false) {
  BoundA out;
  // Lower bound: positive coefficients take the lower line, negative ones the upper line.
  if (a.lA.defined()) {
    const ElementwiseLines l = lines_for(alpha_l);
    out.lA = relax_elementwise_side(a.lA, l.lower_k, l.lower_b, l.upper_k, l.upper_b, bias.lower,
                                    -std::numeric_limits<double>::infinity(), may_overflow);
  }
  if (a.uA.defined()) {
    const ElementwiseLines l = lines_for(alpha_u);
    out.uA = relax_elementwise_side(a.uA, l.upper_k, l.upper_b, l.lower_k, l.lower_b, bias.upper,
                                    std::numeric_limits<double>::infinity(), may_overflow);
  }
  return out;
}

}  // namespace distcrown::ops
