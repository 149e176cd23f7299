#include "distcrown/methods/compute_bounds.hpp"

#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown {

Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options, const at::Tensor& C,
                        collective::CommPtr spec_comm) {
  if (method == Method::kIbp) return ibp_bounds(g, box, C);
  if (method == Method::kAlphaCrown) {
    if (spec_comm && spec_comm->size() > 1) {
      throw UnsupportedError("spec-parallel alpha-CROWN (its AllGather cuts the gradients)");
    }
    return alpha_crown(g, box, C, AlphaOptions{}, options).bounds;
  }
  CrownEngine engine(g, box, options, std::move(spec_comm));
  engine.compute_intermediate_bounds();
  return engine.output_bounds(C);
}

}  // namespace distcrown
