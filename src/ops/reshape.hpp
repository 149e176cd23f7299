#pragma once
// Shape-only operators on a bounded tensor: Reshape / Flatten (keep the batch dim; the rest is
// viewed as `shape`), Transpose (permutes non-batch dims).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

/// y = x.reshape([batch, *shape]); shape excludes the batch dim.
NodePtr make_reshape(std::vector<int64_t> shape, std::string op_type = "Reshape");

/// y = x broadcast to [batch, *shape] (shape excludes the batch dim; x's non-batch dims
/// right-aligned against it, each 1 or equal).
NodePtr make_expand(std::vector<int64_t> shape);

/// y = x.permute(perm) with perm[0] == 0 (the batch dim stays first).
NodePtr make_transpose(std::vector<int64_t> perm);

}  // namespace distcrown::ops
