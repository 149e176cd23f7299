#pragma once
// One entry point for the three methods: IBP, CROWN (methods/crown.hpp) or α-CROWN
// (methods/alpha_crown.hpp) bounds of C·output over a box.
#include "distcrown/bounds/interval.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown {

/// IBP, CROWN or α-CROWN (default AlphaOptions) bounds of C·output (see CrownEngine); lower/upper
/// [batch, spec].
Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options = {}, const at::Tensor& C = {},
                        collective::CommPtr spec_comm = nullptr);

/// Throws NumericError unless every defined bound in `b` is finite (NaN or ±inf bounds come from
/// an overflow of the dtype, never from a finite network over a finite box).
void require_finite(const Interval& b);

}  // namespace distcrown
