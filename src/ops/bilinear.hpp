#pragma once
// Products of two bounded tensors (both depend on the perturbed input): Mul (elementwise, with
// ONNX broadcasting) and MatMul (attention's Q·Kᵀ and scores·V). Each scalar product x·y with
// x ∈ [x_l, x_u], y ∈ [y_l, y_u] is relaxed by two McCormick planes, auto_LiRPA's choice
// (operators/bivariate.py, MulHelper):
//   lower  x·y ≥ y_l·x + x_l·y − x_l·y_l     ((x − x_l)(y − y_l) ≥ 0)
//   upper  x·y ≤ y_u·x + x_l·y − x_l·y_u     ((x − x_l)(y − y_u) ≤ 0)
// α-CROWN mixes each side's two McCormick planes per product term (r ∈ [0, 1], auto_LiRPA's
// interpolated relaxation; r = 1 gives the planes above).
// IBP takes the min and max of the four corner products (summed over the contracted dim for
// MatMul).
#include <optional>
#include <utility>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

/// x ⊙ y, inputs [batch, *x_shape] and [batch, *y_shape] broadcasting to the output. With a
/// `range` [lo, hi] that every value of the product is known to lie in (softmax's [0, 1]), IBP
/// intersects its bounds with it. Where an input bound is not finite (exp past the dtype's
/// range), IBP reads 0·∞ as 0, α-CROWN keeps the node's CROWN planes, and a CROWN row that needs a
/// plane that is not finite gets an infinite bound of its side (the engine then falls back to
/// IBP, methods/crown.cpp).
NodePtr make_bilinear_mul(std::optional<std::pair<double, double>> range = std::nullopt);
/// x · y over the last two dims: [batch, *lead, n, k] · [batch, *lead, k, m] -> [batch, *lead, n,
/// m] (equal leading dims).
NodePtr make_bilinear_matmul();

}  // namespace distcrown::ops
