#pragma once
// Linear: y = x Wᵀ + b on the last dim. x [batch, ..., in], W [out, in], b [out] (optional).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_linear(ParamPtr weight, ParamPtr bias);

// Shared by the linear operators (BoundLinear, the tensor-parallel ones in linear_tp.hpp).

/// Products at least this many columns wide keep each row's rounding independent of the others.
constexpr int64_t kRowIndependentMinColumns = 16;

/// A [S, B, ..., k] · w [k, n] -> [S, B, ..., n]. For products only a few columns wide MKL picks
/// kernels whose rounding of a row depends on the other rows; with at least
/// kRowIndependentMinColumns columns (zero padding) it does not, which keeps chunked and
/// spec-parallel passes bitwise equal to one pass (docs/architecture.md, "Row independence").
at::Tensor matmul_row_independent(const at::Tensor& A, const at::Tensor& w);

/// IBP of x Wᵀ (+ b) in auto_LiRPA's centre/radius form: centre W·mid + b, radius |W|·rad.
struct CentreRadius {
  at::Tensor centre;  // [batch, ..., out]
  at::Tensor radius;  // [batch, ..., out]
};
CentreRadius linear_centre_radius(const Interval& x, const at::Tensor& w, const at::Tensor& b);

}  // namespace distcrown::ops
