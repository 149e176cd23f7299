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

/// A node whose shape is [batch, *onnx_shape] as an ONNX value: batched again when its ONNX dim 0
/// is 1 and another dim follows (a reshape drops that dim: it is the batch), else unbatched.
Value as_onnx_shaped(LoweringContext& ctx, int node, const std::vector<int64_t>& onnx_shape);

/// Bounded input i as a node of shape [batch, *ONNX shape]: itself when unbatched, else a
/// reshape [batch, *rest] -> [batch, 1, *rest] (the ONNX batch dim, 1 for one sample, kept as an
/// ordinary dim). For lowerings that move or mix ONNX dim 0 (Transpose, a constant's MatMul
/// from the left).
int unbatched_view(LoweringContext& ctx, size_t i);

}  // namespace distcrown::ops
