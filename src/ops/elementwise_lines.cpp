#include "elementwise_lines.hpp"

namespace distcrown::ops {
namespace {

// Σ over the node dims of A ⊙ x -> [S, B], x [B, *shape] or [S, B, *shape].
at::Tensor row_dot(const at::Tensor& A, const at::Tensor& x) {
  if (x.dim() < A.dim()) return contract(A, x);
  return (A * x).reshape({A.size(0), A.size(1), -1}).sum(2);
}

}  // namespace

void bound_lost_rows(at::Tensor& bias, const at::Tensor& lost, double unbounded,
                     at::ScalarType dtype) {
  const at::Tensor rows = lost.reshape({lost.size(0), lost.size(1), -1}).any(2);  // [S, B]
  accumulate(bias, at::where(rows, unbounded, 0.0).to(dtype));
}

at::Tensor relax_elementwise_side(const at::Tensor& A, const at::Tensor& k_pos,
                                  const at::Tensor& b_pos, const at::Tensor& k_neg,
                                  const at::Tensor& b_neg, at::Tensor& bias, double unbounded,
                                  bool may_overflow) {
  const at::Tensor pos = A.clamp_min(0);
  const at::Tensor neg = A - pos;  // as ops/relu.cpp: A == 0 counts as positive for autograd
  const at::Tensor finite_pos =
      may_overflow ? at::isfinite(k_pos) & at::isfinite(b_pos) : at::Tensor();
  const at::Tensor finite_neg =
      may_overflow ? at::isfinite(k_neg) & at::isfinite(b_neg) : at::Tensor();
  if (!may_overflow || (finite_pos.all().item<bool>() && finite_neg.all().item<bool>())) {
    accumulate(bias, row_dot(pos, b_pos));
    accumulate(bias, row_dot(neg, b_neg));
    return pos * k_pos + neg * k_neg;
  }
  // A line that is not finite (exp's chord past the dtype's range) bounds nothing: a row with a
  // coefficient on such a neuron gets an infinite bound of its side, and no A passes through the
  // neuron (an infinite A would meet zeros further down as NaN).
  const at::Tensor zero = at::zeros({}, A.options());
  const at::Tensor p = at::where(finite_pos, pos, zero);
  const at::Tensor n = at::where(finite_neg, neg, zero);
  accumulate(bias, row_dot(p, at::where(finite_pos, b_pos, zero)));
  accumulate(bias, row_dot(n, at::where(finite_neg, b_neg, zero)));
  bound_lost_rows(bias, ((pos != 0) & ~finite_pos) | ((neg != 0) & ~finite_neg), unbounded,
                  A.scalar_type());
  return p * at::where(finite_pos, k_pos, zero) + n * at::where(finite_neg, k_neg, zero);
}

}  // namespace distcrown::ops
