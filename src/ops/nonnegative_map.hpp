#pragma once
// A linear map y = M(x) with non-negative coefficients and no constant term (AveragePool,
// nearest and linear Resize): IBP in auto_LiRPA's centre/radius form (centre M(mid), radius
// M(rad), exact since |M| = M) and the CROWN step through the adjoint Mᵀ on both sides.
#include <span>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

class NonNegativeLinearMap : public BoundNode {
 public:
  at::Tensor forward(std::span<const at::Tensor> x) const override { return apply(x[0]); }
  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor centre = apply((x[0]->upper + x[0]->lower) / 2);
    const at::Tensor radius = apply((x[0]->upper - x[0]->lower) / 2);
    return {centre - radius, centre + radius};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    return {map_sides(
        a, bias, [&](const at::Tensor& A) { return adjoint(A); }, no_bias)};
  }

 protected:
  /// M(x): x [batch, *in] -> [batch, *out].
  [[nodiscard]] virtual at::Tensor apply(const at::Tensor& x) const = 0;
  /// Mᵀ(A): A [S, batch, *out] -> [S, batch, *in].
  [[nodiscard]] virtual at::Tensor adjoint(const at::Tensor& A) const = 0;
};

}  // namespace distcrown::ops
