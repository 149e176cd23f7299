#include "elementwise_lines.hpp"

namespace distcrown::ops {
namespace {

// Σ over the node dims of A ⊙ x -> [S, B], x [B, *shape] or [S, B, *shape].
at::Tensor row_dot(const at::Tensor& A, const at::Tensor& x) {
  if (x.dim() < A.dim()) return contract(A, x);
  return (A * x).reshape({A.size(0), A.size(1), -1}).sum(2);
}

}  // namespace

at::Tensor relax_elementwise_side(const at::Tensor& A, const at::Tensor& k_pos,
                                  const at::Tensor& b_pos, const at::Tensor& k_neg,
                                  const at::Tensor& b_neg, at::Tensor& bias) {
  const at::Tensor pos = A.clamp_min(0);
  const at::Tensor neg = A - pos;  // as ops/relu.cpp: A == 0 counts as positive for autograd
  accumulate(bias, row_dot(pos, b_pos));
  accumulate(bias, row_dot(neg, b_neg));
  return pos * k_pos + neg * k_neg;
}

}  // namespace distcrown::ops
