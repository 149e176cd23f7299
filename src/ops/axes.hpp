#pragma once
// Helpers of the shape-operator lowerings (reshape, concat, slice, reduce, constant): axes and
// integer lists read from attributes or constant inputs, static shapes.
// Shapes here include the batch dim (dim 0, 1 at load); a bounded operator acts on the other dims.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "graph/op_registry.hpp"

namespace distcrown::ops {

/// The most elements a tensor that shape arithmetic builds at load from a few values
/// (ConstantOfShape, Expand, Range, Where) may have: 2^24, 64 MiB in float32. Initializers may
/// hold up to 2^31, but the file pays for those; a one-byte change of a shape value must not ask
/// for gigabytes (and the bounded nodes it feeds for many more).
constexpr int64_t kMaxBuiltElements = int64_t{1} << 24;

/// `axis` in [-rank, rank) as an index in [0, rank); ctx.fail otherwise.
int64_t normalised_axis(const LoweringContext& ctx, int64_t axis, int64_t rank);

/// Each of `axes` normalised (normalised_axis), sorted; ctx.fail when one is repeated.
std::vector<int64_t> normalised_axes(const LoweringContext& ctx, std::vector<int64_t> axes,
                                     int64_t rank);

/// The values of constant input i, which must hold integers (ctx.fail for floating point).
std::vector<int64_t> int_values(const LoweringContext& ctx, size_t i);

/// The static ONNX shape of input i: a constant's sizes, a batched node's shape (with the batch
/// dim), an unbatched node's shape without the batch dim (Value::unbatched).
std::vector<int64_t> sizes_of(const LoweringContext& ctx, size_t i);

/// Refuses (ctx.unsupported) a shape with more than kMaxBuiltElements elements, and (ctx.fail)
/// negative dimensions: for tensors built at load from shape values in the model.
void check_buildable_shape(const LoweringContext& ctx, const std::vector<int64_t>& shape);

/// The numpy broadcast of `shapes` (ctx.fail when they do not broadcast), for folding constants
/// elementwise; refused like check_buildable_shape when it has more elements than both
/// kMaxBuiltElements and `held` (the largest constant it is computed from: broadcasting two 1-D
/// constants [n] and [n, 1] squares their size).
std::vector<int64_t> checked_broadcast(const LoweringContext& ctx,
                                       const std::vector<std::vector<int64_t>>& shapes,
                                       int64_t held);

/// checked_broadcast of the shapes of `constants`, held = the largest of them.
std::vector<int64_t> checked_broadcast(const LoweringContext& ctx,
                                       const std::vector<at::Tensor>& constants);

/// [batch, *rest].
std::vector<int64_t> with_batch(int64_t batch, const std::vector<int64_t>& rest);

}  // namespace distcrown::ops
