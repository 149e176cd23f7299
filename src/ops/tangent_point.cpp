#include "tangent_point.hpp"

#include <ATen/ATen.h>

namespace distcrown::ops {

Interval TangentPointElementwise::ibp(std::span<const Interval* const> x) const {
  const Interval in = floored(*x[0]);
  require_domain(in);
  const Interval* args[] = {&in};
  return MonotoneElementwise::ibp(args);
}

std::vector<BoundA> TangentPointElementwise::backward(const BoundA& a,
                                                      std::span<const Interval* const> bounds,
                                                      BiasPair& bias) const {
  return backward_relaxed(a, bounds, bias, RelaxParams{});
}

at::Tensor TangentPointElementwise::initial_relaxation_params(const Interval& given) const {
  const Interval in = floored(given);
  return (in.lower + in.upper) / 2;  // [B, *shape], as auto_LiRPA initialises its α
}

void TangentPointElementwise::project_relaxation_params(at::Tensor& alpha,
                                                        const Interval& given) const {
  const Interval in = floored(given);
  alpha.copy_(at::minimum(at::maximum(alpha, in.lower), in.upper));
}

std::vector<BoundA> TangentPointElementwise::backward_relaxed(
    const BoundA& a, std::span<const Interval* const> bounds, BiasPair& bias,
    const RelaxParams& p) const {
  const Interval pre = floored(*bounds[0]);
  require_domain(pre);
  return {relax_elementwise(
      a, bias, p.alpha_l, p.alpha_u, [&](const at::Tensor& t) { return lines(pre, t); },
      /*may_overflow=*/true)};
}

Interval TangentPointElementwise::floored(const Interval& in) const {
  if (!floor_) return in;
  return {in.lower.clamp_min(*floor_), in.upper.clamp_min(*floor_)};
}

}  // namespace distcrown::ops
