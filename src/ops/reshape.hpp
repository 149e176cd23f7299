#pragma once
// Shape-only operators on a bounded tensor: Reshape / Flatten (keep the batch dim; the rest is
// viewed as `shape`), Transpose (permutes non-batch dims).
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_node.hpp"
#include "graph/op_registry.hpp"

namespace distcrown::ops {

/// y = x.reshape([batch, *shape]); shape excludes the batch dim.
NodePtr make_reshape(std::vector<int64_t> shape, std::string op_type = "Reshape");

/// y = x broadcast to [batch, *shape] (shape excludes the batch dim; x's non-batch dims
/// right-aligned against it, each 1 or equal).
NodePtr make_expand(std::vector<int64_t> shape);

/// The bounded node `x`, broadcast first (an Expand node) where the constant `c` it meets
/// elementwise would broadcast it to a larger shape ([1, 24, 1] against [54]); `x` itself
/// otherwise. A constant that would broadcast the batch dim is refused as unsupported.
int broadcast_to_constant(LoweringContext& ctx, int x, const at::Tensor& c);

/// The same against a `shape` (ONNX Expand's), refused like checked_broadcast past `held`
/// elements.
int broadcast_to_shape(LoweringContext& ctx, int x, const std::vector<int64_t>& shape,
                       int64_t held);

/// y = x.permute(perm) with perm[0] == 0 (the batch dim stays first).
NodePtr make_transpose(std::vector<int64_t> perm);

}  // namespace distcrown::ops
