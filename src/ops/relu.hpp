#pragma once
// ReLU with auto_LiRPA's default ("adaptive") linear relaxation. For pre-activation bounds [l, u]:
//   upper line  d_u·x + b_u,  d_u = u⁺/(u⁺ − l⁻), b_u = −l⁻·d_u   (the chord; 1 and 0 when stable)
//   lower line  d_l·x,        d_l = 1 if d_u > 0.5 else 0          (0/1 when stable)
// with l⁻ = min(l, 0), u⁺ = max(max(u, 0), l⁻ + 1e-8), exactly as auto_LiRPA computes them.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_relu();

struct ReluRelaxation {
  at::Tensor upper_d;  // [batch, *shape]
  at::Tensor upper_b;  // [batch, *shape]
  at::Tensor lower_d;  // [batch, *shape]
};
ReluRelaxation relu_relaxation(const Interval& pre);

}  // namespace distcrown::ops
