// Softmax of a bounded tensor, decomposed as auto_LiRPA does (operators/softmax.py, 'complex'
// option, with fixed_reducemax_index as alpha-beta-CROWN sets it):
//   softmax(x)_i = exp(x_i − x_j) / Σ_k exp(x_k − x_j)
// for one index j per softmax group (a row along the axis). Any j gives the same function, so the
// decomposition is exact whichever j is taken, and each part is bounded with its own relaxation:
//   BoundSoftmaxShift  y = x − x_j           linear once j is fixed (below)
//   Exp                e = exp(y)            ops/convex
//   ReduceSum          s = Σ_axis e (keepdims) ops/reduce
//   Reciprocal         r = 1 / s             ops/convex (s ≥ 1 > 0: e_j = exp(0) = 1)
//   Mul                e · r                 ops/bilinear (McCormick; r broadcasts over the axis)
// In CROWN, j is the maximum of the shift's input in the forward pass at the centre of the input
// box (OpTraits::needs_centre_values), per batch element and group, as auto_LiRPA takes it; IBP
// takes the maximum at the midpoint of the input's interval. Any j is sound.
#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/bilinear.hpp"
#include "ops/convex.hpp"
#include "ops/reduce.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

// y = x − x_j along `axis_` ([batch, *shape] coordinates, ≥ 1): linear once j is fixed.
class BoundSoftmaxShift final : public BoundNode {
 public:
  explicit BoundSoftmaxShift(int64_t axis) : axis_(axis) {}
  std::string op_type() const override { return "SoftmaxShift"; }
  OpTraits traits() const override { return {.needs_centre_values = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    // The maximum of x itself: the shift keeps exp's argument ≤ 0 (any j is exact).
    return x[0] - x[0].amax(axis_, /*keepdim=*/true);
  }

  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor j = index_of((x[0]->lower + x[0]->upper) / 2);  // [B, .., 1, ..]
    at::Tensor lower = x[0]->lower - x[0]->upper.gather(axis_, j);
    at::Tensor upper = x[0]->upper - x[0]->lower.gather(axis_, j);
    // y_j = x_j − x_j = 0 exactly.
    lower = lower.scatter(axis_, j, 0.0);
    upper = upper.scatter(axis_, j, 0.0);
    return {lower, upper};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    // A [S, B, *shape] on y -> on x: A − onehot_j · Σ_axis A (the A dim of `axis_` is axis_ + 1).
    // bounds = {x's bounds (unused), x at the box centre}
    const at::Tensor j = index_of(bounds[1]->lower).unsqueeze(0);  // [1, B, .., 1, ..]
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          const at::Tensor total = A.sum(axis_ + 1, /*keepdim=*/true);
          std::vector<int64_t> idx_shape = total.sizes().vec();
          return A.scatter_add(axis_ + 1, j.expand(idx_shape), -total);
        },
        no_bias)};
  }

 private:
  [[nodiscard]] at::Tensor index_of(const at::Tensor& x) const {
    return x.argmax(axis_, /*keepdim=*/true);
  }

  int64_t axis_;
};

// Softmax over `axis` of a bounded input [batch, *shape] (axis ≥ 1).
Value emit_softmax(LoweringContext& ctx, int from, int64_t axis) {
  const int shift = ctx.emit(std::make_unique<BoundSoftmaxShift>(axis), {from}, "/shift").node;
  const int e = ctx.emit(make_exp(), {shift}, "/exp").node;
  const int s = ctx.emit(make_reduce(Reduction::kSum, {axis}, true), {e}, "/sum").node;
  const int r = ctx.emit(make_reciprocal(), {s}, "/reciprocal").node;
  // Every softmax value is in [0, 1]: IBP keeps its bounds there, whatever exp reached.
  return ctx.emit(make_bilinear_mul(std::pair{0.0, 1.0}), {e, r});
}

// Softmax-1..12 coerce the input to 2-D at `axis` (default 1): the softmax runs over all dims
// from axis on. Softmax-13 and later run over the one dim `axis` (default −1).
Value lower_softmax(LoweringContext& ctx, bool coerce_2d) {
  if (ctx.inputs.size() != 1) ctx.fail("expects 1 input");
  const std::vector<int64_t> shape = sizes_of(ctx, 0);
  const auto rank = int64_t(shape.size());
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", coerce_2d ? 1 : -1), rank);
  if (ctx.all_constant()) {
    const at::Tensor& x = ctx.constant(0);
    if (!coerce_2d) return Value::of_constant(x.softmax(axis));
    return Value::of_constant(x.flatten(axis).softmax(axis == 0 ? 0 : -1).reshape(shape));
  }
  if (!coerce_2d || axis == rank - 1) {
    if (axis == 0) ctx.unsupported("Softmax over the batch dimension");
    return emit_softmax(ctx, ctx.bounded(0), axis);
  }
  // Dims [max(axis, 1), rank) form one group (the batch dim is 1: axis 0 groups every element of
  // a batch element): view them as one dim, take the softmax over it, restore the shape.
  const int64_t first = std::max<int64_t>(axis, 1);
  std::vector<int64_t> grouped(shape.begin() + 1, shape.begin() + first);
  int64_t n = 1;
  for (int64_t d = first; d < rank; ++d) n *= shape[size_t(d)];
  grouped.push_back(n);
  const int flat = ctx.emit(make_reshape(grouped), {ctx.bounded(0)}, "/group").node;
  const int soft = emit_softmax(ctx, flat, int64_t(grouped.size())).node;
  return ctx.emit(make_reshape(std::vector<int64_t>(shape.begin() + 1, shape.end())), {soft},
                  "/ungroup");
}

}  // namespace

void register_softmax(OpRegistry& r) {
  r.add("Softmax", {.first = 1, .last = 12},
        [](LoweringContext& c) { return lower_softmax(c, true); });
  r.add("Softmax", {.first = 13}, [](LoweringContext& c) { return lower_softmax(c, false); });
}

}  // namespace distcrown::ops
