#pragma once
// Concat of bounded tensors and constants along a non-batch axis. A multi-input node: input k is
// the k-th bounded part; the constant parts are parameters. Linear without mixing: IBP concatenates
// the intervals (exact per element), and the CROWN step splits A along the axis, the pieces of the
// bounded parts going to their inputs and those of the constants into the bias.
#include <cstdint>
#include <vector>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

/// One part of a concatenation, in order: a constant (its value without the batch dim, [*shape]
/// broadcast over the batch) or, when `constant` is null, the next bounded input.
struct ConcatPart {
  int64_t length = 0;  // its extent along the axis
  ParamPtr constant;
};

/// y = cat(parts, axis) on [batch, *shape]; axis >= 1.
NodePtr make_concat(int64_t axis, std::vector<ConcatPart> parts);

}  // namespace distcrown::ops
