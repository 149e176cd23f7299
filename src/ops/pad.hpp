#pragma once
// Pad in mode "constant" on a bounded tensor: y = P(x) + value·M, where P places x inside the
// padded shape (negative pads crop) and M is 1 at the padded positions. Affine, elementwise in the
// sense that every output is one input element or the constant, so IBP is exact per element.
//   pads: for the non-batch dims of x [batch, d1, ..., dn], in at::constant_pad_nd's order (the
//   last dim first): {begin_n, end_n, begin_{n-1}, end_{n-1}, ..., begin_1, end_1}; at most 2n.
#include <cstdint>
#include <vector>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_pad(std::vector<int64_t> pads, double value);

}  // namespace distcrown::ops
