#pragma once
// Linear bounds k·x + b on an elementwise y = f(x), per neuron, and the CROWN step through them:
// the shared core of the nonlinear elementwise operators whose relaxation is a pair of lines
// (s_shaped.cpp: Sigmoid, Tanh; convex.cpp: Exp, Reciprocal). Internal to ops/.
#include <ATen/ATen.h>

#include "distcrown/bounds/interval.hpp"

namespace distcrown::ops {

/// lower_k·x + lower_b ≤ f(x) ≤ upper_k·x + upper_b on the neuron's input interval. Each tensor
/// is [batch, *shape] (CROWN) or [rows, batch, *shape] (α per spec row).
struct ElementwiseLines {
  at::Tensor lower_k, lower_b, upper_k, upper_b;
};

/// One side of the CROWN step: A [S, B, *shape] -> A⁺·k_pos + A⁻·k_neg, adding
/// A⁺·b_pos + A⁻·b_neg into `bias` ([S, B]). The lower side passes the lower line as `pos`, the
/// upper side the upper line.
at::Tensor relax_elementwise_side(const at::Tensor& A, const at::Tensor& k_pos,
                                  const at::Tensor& b_pos, const at::Tensor& k_neg,
                                  const at::Tensor& b_neg, at::Tensor& bias);

/// The CROWN step for both sides, with `lines_for(alpha)` giving the lines of one side from its
/// α (undefined: CROWN's choice).
template <class LinesFor>
BoundA relax_elementwise(const BoundA& a, BiasPair& bias, const at::Tensor& alpha_l,
                         const at::Tensor& alpha_u, LinesFor&& lines_for) {
  BoundA out;
  // Lower bound: positive coefficients take the lower line, negative ones the upper line.
  if (a.lA.defined()) {
    const ElementwiseLines l = lines_for(alpha_l);
    out.lA = relax_elementwise_side(a.lA, l.lower_k, l.lower_b, l.upper_k, l.upper_b, bias.lower);
  }
  if (a.uA.defined()) {
    const ElementwiseLines l = lines_for(alpha_u);
    out.uA = relax_elementwise_side(a.uA, l.upper_k, l.upper_b, l.lower_k, l.lower_b, bias.upper);
  }
  return out;
}

}  // namespace distcrown::ops
