#pragma once
// Interval bound propagation over a whole graph.
#include <vector>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"

namespace distcrown {

/// Intervals of every node, [batch, *shape] each (index = node index).
std::vector<Interval> ibp_all(const BoundGraph& g, const InputBox& box);

/// IBP of the output under a spec matrix C [spec, n_out] (undefined = identity);
/// lower/upper [batch, spec].
Interval ibp_bounds(const BoundGraph& g, const InputBox& box, const at::Tensor& C = {});

/// Interval of C·y for y in [lo, hi]: lo/hi [batch, n], C [spec, n] -> [batch, spec].
Interval apply_spec(const Interval& y, const at::Tensor& C);

}  // namespace distcrown
