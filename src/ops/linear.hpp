#pragma once
// Linear: y = x Wᵀ + b on the last dim. x [batch, ..., in], W [out, in], b [out] (optional).
#include "ops/affine.hpp"

namespace distcrown::ops {

NodePtr make_linear(ParamPtr weight, ParamPtr bias);

/// y = x Wᵀ + b (ops/affine.hpp) as BoundLinear and the tensor-parallel layers compute it: A·W
/// row-independently (below), the bias term contract(A, b).
class LinearMaps : public AffineOp {
 public:
  using AffineOp::AffineOp;

 protected:
  at::Tensor apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const override;
  at::Tensor map_a(const at::Tensor& A, const at::Tensor& w) const override;
  at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) const override;
};

/// Products at least this many columns wide keep each row's rounding independent of the others.
constexpr int64_t kRowIndependentMinColumns = 16;

/// A [S, B, ..., k] · w [k, n] -> [S, B, ..., n]. For products only a few columns wide MKL picks
/// kernels whose rounding of a row depends on the other rows; with at least
/// kRowIndependentMinColumns columns (zero padding) it does not, which keeps chunked and
/// spec-parallel passes bitwise equal to one pass (docs/architecture.md, "Row independence").
at::Tensor matmul_row_independent(const at::Tensor& A, const at::Tensor& w);

}  // namespace distcrown::ops
