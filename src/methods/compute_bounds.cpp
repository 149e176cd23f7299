#include "distcrown/methods/compute_bounds.hpp"

#include <ATen/ATen.h>

#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/util/error.hpp"
#include "util/tensor_values.hpp"

namespace distcrown {

void require_finite(const Interval& b) {
  if (all_finite(b)) return;
  const at::ScalarType dtype = (b.lower.defined() ? b.lower : b.upper).scalar_type();
  throw NumericError("the bounds are not finite: the computation overflowed " + dtype_name(dtype) +
                     " (weights or input bounds too large; --dtype float64 may help)");
}

MethodBounds compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                            const AlphaOptions& alpha, const at::Tensor& C,
                            const PassContext& context) {
  MethodBounds out;
  if (method == Method::kIbp) {
    out.bounds = ibp_bounds(g, box, C);
  } else if (method == Method::kAlphaCrown) {
    const AlphaResult r = alpha_crown(alpha, context, g, box, C);
    out.bounds = r.bounds;
    out.alpha_bytes = r.alpha_bytes;
    out.starts_left_out = r.starts_left_out;
    out.memory_limited = r.memory_limited;
  } else {
    CrownEngine engine(g, box, alpha.bound, context);
    engine.compute_intermediate_bounds();
    out.bounds = engine.output_bounds(C);
  }
  require_finite(out.bounds);
  return out;
}

Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options, const at::Tensor& C,
                        const PassContext& context) {
  return compute_bounds(g, box, method, AlphaOptions{}.with_bound(options), C, context).bounds;
}

}  // namespace distcrown
