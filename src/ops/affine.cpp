#include "ops/affine.hpp"

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"

namespace distcrown::ops {

AffineOp::AffineOp(ParamPtr weight, ParamPtr bias) : w_(std::move(weight)), b_(std::move(bias)) {
  if (!w_) throw InvalidArgument("an affine operator needs a weight");
}

std::vector<ParamPtr*> AffineOp::params() {
  std::vector<ParamPtr*> p{&w_};
  if (b_) p.push_back(&b_);
  return p;
}

at::Tensor AffineOp::forward(std::span<const at::Tensor> x) const {
  // A concrete pass in a wider dtype than the parameters' (the double check of a counterexample
  // that float32 cannot represent, bab/attack.cpp) casts them, exactly; the same dtype is a no-op.
  const at::ScalarType dtype = x[0].scalar_type();
  const at::Tensor b = bias();
  return apply(x[0], weight().to(dtype), b.defined() ? b.to(dtype) : b);
}

AffineOp::CentreRadius AffineOp::centre_radius(const Interval& x, bool with_bias) const {
  const at::Tensor w = weight();
  const at::Tensor mid = (x.upper + x.lower) / 2;
  const at::Tensor rad = (x.upper - x.lower) / 2;
  return {apply(mid, w, with_bias ? bias() : at::Tensor()), apply(rad, w.abs(), at::Tensor())};
}

Interval AffineOp::ibp(std::span<const Interval* const> x) const {
  const CentreRadius cr = centre_radius(*x[0], true);
  return {cr.centre - cr.radius, cr.centre + cr.radius};
}

std::vector<BoundA> AffineOp::backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                                       BiasPair& bias_acc) const {
  const at::Tensor w = weight();
  const at::Tensor b = bias();
  return {map_sides(
      a, bias_acc, [&](const at::Tensor& A) { return map_a(A, w); },
      [&](const at::Tensor& A) { return b.defined() ? bias_term(A, b) : at::Tensor(); })};
}

}  // namespace distcrown::ops
