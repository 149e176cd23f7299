#pragma once
// One entry point for the three methods: IBP, CROWN (methods/crown.hpp) or α-CROWN
// (methods/alpha_crown.hpp) bounds of C·output over a box.
#include "distcrown/bounds/interval.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"

namespace distcrown {

/// Bounds of one method, and what α-CROWN held on this rank (0 for the others): bytes of α, the
/// intermediate starts it left out to keep under the context's memory limit, and whether it
/// stopped early at that limit.
struct MethodBounds {
  Interval bounds;  // lower/upper [batch, spec]
  int64_t alpha_bytes = 0;
  int starts_left_out = 0;
  bool memory_limited = false;
};

/// IBP, CROWN or α-CROWN (with `alpha`'s options) bounds of C·output (see CrownEngine), both
/// sides, the passes' options alpha.bound; the passes run in `context` (its spec_comm splits
/// CROWN's and α-CROWN's rows over its ranks). Throws NumericError when a bound is not finite.
MethodBounds compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                            const AlphaOptions& alpha, const at::Tensor& C = {},
                            const PassContext& context = {});

/// The same with α-CROWN's default options and the passes' `options`; lower/upper [batch, spec].
Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options = {}, const at::Tensor& C = {},
                        const PassContext& context = {});

/// Throws NumericError unless every defined bound in `b` is finite (NaN or ±inf bounds come from
/// an overflow of the dtype, never from a finite network over a finite box).
void require_finite(const Interval& b);

}  // namespace distcrown
