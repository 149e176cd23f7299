#pragma once
// ReduceSum and ReduceMean over non-batch axes of a bounded tensor: linear maps with nonnegative
// coefficients that mix elements. IBP reduces each side (monotone); the
// CROWN step broadcasts A back over the reduced axes (divided by their size for the mean).
#include <cstdint>
#include <vector>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

enum class Reduction { kSum, kMean };

/// y = sum or mean of x over `axes` (sorted, distinct, >= 1, in [batch, *shape] coordinates);
/// keepdims keeps them as size-1 dims.
NodePtr make_reduce(Reduction kind, std::vector<int64_t> axes, bool keepdims);

}  // namespace distcrown::ops
