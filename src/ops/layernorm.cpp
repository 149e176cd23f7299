// LayerNormalization (opset 17) of a bounded tensor, lowered into the decomposition auto_LiRPA
// bounds in exported models (its graph of a torch LayerNorm: operators/normalization.py's
// BoundLayerNormalization is not used for ONNX; torch.onnx before opset 17 emits these nodes):
//   m = ReduceMean(x, axes, keepdims)       ops/reduce   axes = [axis, rank)
//   c = x − m                               ops/add_sub  (m broadcasts along the axes)
//   v = ReduceMean(c², axes, keepdims)      ops/power (x², convex), ops/reduce
//   s = √(v + ε)                            ops/add_sub, ops/power
//   r = 1 / s                               ops/convex
//   y = (c · r) ⊙ scale + bias              ops/bilinear (McCormick; r broadcasts), mul/add
// v ≥ 0 and so v + ε ≥ ε and s ≥ √ε hold for every real input, but CROWN's intermediate bounds
// on v + ε and s (not intersected with IBP, as auto_LiRPA) can reach below; √ and 1/· are told
// these floors (GraphBuilder::known_floor, shrunk by 1e-6 relative for rounding) and clamp their
// input bounds there, as auto_LiRPA clamps the bounds of x² and √ at 0 (clamp_interim_bounds).
// The same floors reach √ and Div in the decomposed form torch.onnx exports before opset 17.
#include <ATen/ATen.h>

#include "distcrown/graph/bound_graph.hpp"
#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/axes.hpp"
#include "ops/bilinear.hpp"
#include "ops/convex.hpp"
#include "ops/mul_div.hpp"
#include "ops/power.hpp"
#include "ops/reduce.hpp"

namespace distcrown::ops {
namespace {

Value lower_layer_norm(LoweringContext& ctx) {
  if (ctx.inputs.size() < 2 || ctx.inputs.size() > 3) ctx.fail("expects 2 or 3 inputs");
  if (ctx.output_count > 1) ctx.unsupported("LayerNormalization with Mean / InvStdDev outputs");
  const std::vector<int64_t> shape = sizes_of(ctx, 0);
  const auto rank = int64_t(shape.size());
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", -1), rank);
  const double eps = ctx.attrs.get_float("epsilon", 1e-5);
  if (!(eps > 0)) ctx.fail("epsilon must be positive");
  const bool has_bias = ctx.has_input(2);
  if (ctx.all_constant()) {
    const std::vector<int64_t> normalised(shape.begin() + axis, shape.end());
    const at::Tensor bias = has_bias ? ctx.constant(2) : at::Tensor();
    return Value::of_constant(
        at::layer_norm(ctx.constant(0), normalised, ctx.constant(1), bias, eps));
  }
  if (axis == 0) ctx.unsupported("LayerNormalization over the batch dimension");
  if (!ctx.inputs[1].is_constant() || (has_bias && !ctx.inputs[2].is_constant())) {
    ctx.unsupported("LayerNormalization with a variable scale or bias");
  }
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  const int x = ctx.bounded(0);
  const int m = ctx.emit(make_reduce(Reduction::kMean, axes, true), {x}, "/mean").node;
  const int c = ctx.emit(make_sub(), {x, m}, "/centred").node;
  const int sq = ctx.emit(make_pow(2), {c}, "/square").node;
  const int v = ctx.emit(make_reduce(Reduction::kMean, axes, true), {sq}, "/variance").node;
  const int ve =
      ctx.emit(make_add_const(ctx.param(at::scalar_tensor(eps, at::kDouble))), {v}, "/plus_eps")
          .node;
  // known_floor: v ≥ 0 (a mean of squares), v + ε ≥ ε, √(v + ε) ≥ √ε.
  const int s = ctx.emit(make_sqrt_of(ctx.builder.known_floor(ve)), {ve}, "/sqrt").node;
  const int r = ctx.emit(make_reciprocal_of(ctx.builder.known_floor(s)), {s}, "/reciprocal").node;
  const int n = ctx.emit(make_bilinear_mul(), {c, r}, "/normalised").node;
  if (!has_bias) return ctx.emit(make_mul_const(ctx.param(ctx.constant(1))), {n});
  const int scaled = ctx.emit(make_mul_const(ctx.param(ctx.constant(1))), {n}, "/scaled").node;
  return ctx.emit(make_add_const(ctx.param(ctx.constant(2))), {scaled});
}

}  // namespace

void register_layernorm(OpRegistry& r) {
  r.add("LayerNormalization", {.first = 17}, lower_layer_norm);
}

}  // namespace distcrown::ops
