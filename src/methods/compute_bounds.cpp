#include "distcrown/methods/compute_bounds.hpp"

#include <ATen/ATen.h>

#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/tensor_values.hpp"

namespace distcrown {

void require_finite(const Interval& b) {
  if (all_finite(b)) return;
  const at::ScalarType dtype = (b.lower.defined() ? b.lower : b.upper).scalar_type();
  throw NumericError("the bounds are not finite: the computation overflowed " + dtype_name(dtype) +
                     " (weights or input bounds too large; --dtype float64 may help)");
}

Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options, const at::Tensor& C,
                        collective::CommPtr spec_comm) {
  Interval b;
  if (method == Method::kIbp) {
    b = ibp_bounds(g, box, C);
  } else if (method == Method::kAlphaCrown) {
    b = alpha_crown(g, box, C, AlphaOptions{}, options, true, true, spec_comm).bounds;
  } else {
    CrownEngine engine(g, box, options, std::move(spec_comm));
    engine.compute_intermediate_bounds();
    b = engine.output_bounds(C);
  }
  require_finite(b);
  return b;
}

}  // namespace distcrown
