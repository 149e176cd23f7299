#include "ops/monotone.hpp"

#include <ATen/ATen.h>

namespace distcrown::ops {

at::Tensor MonotoneElementwise::forward(std::span<const at::Tensor> x) const { return apply(x[0]); }

Interval MonotoneElementwise::ibp(std::span<const Interval* const> x) const {
  at::Tensor at_lower = apply(x[0]->lower);
  at::Tensor at_upper = apply(x[0]->upper);
  if (direction_ == Direction::kNonIncreasing) std::swap(at_lower, at_upper);
  return {std::move(at_lower), std::move(at_upper)};
}

std::vector<BoundA> MonotoneElementwise::backward(const BoundA& a,
                                                  std::span<const Interval* const> bounds,
                                                  BiasPair& bias) const {
  // y ∈ [y_l, y_u] per neuron ([B, *shape]); A [S, B, *shape] does not reach the input.
  const Interval y = ibp(bounds);
  auto constant_side = [](const at::Tensor& A, const at::Tensor& at_pos, const at::Tensor& at_neg,
                          at::Tensor& acc) {
    const at::Tensor pos = A.clamp_min(0);
    accumulate(acc, contract(pos, at_pos));
    accumulate(acc, contract(A - pos, at_neg));
    return at::zeros_like(A);
  };
  BoundA out;
  if (a.lA.defined()) out.lA = constant_side(a.lA, y.lower, y.upper, bias.lower);
  if (a.uA.defined()) {
    at::Tensor zero = constant_side(a.uA, y.upper, y.lower, bias.upper);
    out.uA = a.lA.defined() && a.uA.is_same(a.lA) ? out.lA : std::move(zero);
  }
  return {out};
}

}  // namespace distcrown::ops
