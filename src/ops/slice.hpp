#pragma once
// Selecting elements of a bounded tensor along non-batch axes with constant positions: Slice
// (ranges) and Gather (an index list). Both are linear without mixing: each output element is one
// input element, so IBP is [f(l), f(u)] (exact) and the CROWN step is the adjoint, which puts A
// back at the selected positions (zeros elsewhere; Gather sums A over repeated indices).
#include <cstdint>
#include <vector>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

/// x.slice(axis, start, end, step) on one axis of [batch, *shape]: axis >= 1, 0 <= start <= end
/// <= size, step >= 1 (already clamped to the input's size).
struct SliceRange {
  int64_t axis = 1;
  int64_t start = 0;
  int64_t end = 0;
  int64_t step = 1;
};

/// y = x sliced by each range in turn (distinct axes).
NodePtr make_slice(std::vector<SliceRange> ranges);

/// y = x.index_select(axis, indices) with the indices' axis replaced by `index_shape` (empty: one
/// scalar index, the axis disappears). axis >= 1; indices in [0, size of the axis).
NodePtr make_gather(int64_t axis, std::vector<int64_t> indices, std::vector<int64_t> index_shape);

}  // namespace distcrown::ops
