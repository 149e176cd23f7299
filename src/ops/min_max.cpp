// Min, Max and Clip: elementwise selections, folded on constants and lowered exactly through ReLU
// on bounded tensors,
//   max(a, b) = a + relu(b − a),   min(a, b) = a − relu(a − b),   clip(x) = min(max(x, lo), hi),
// so their relaxation is the ReLU's (α-CROWN over its lower slope) and branch and bound splits
// them at the point where the two sides meet, as it splits a ReLU at 0.
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/axes.hpp"
#include "ops/mul_div.hpp"
#include "ops/relu.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

enum class Pick { kMin, kMax };

// The node of a bounded value, refused where it has no batch dim (Value::unbatched).
int node_of(const LoweringContext& ctx, const Value& v) {
  if (v.unbatched) ctx.unsupported_unbatched();
  return v.node;
}

// Two bounded nodes broadcast to their common shape (each Expanded where it is smaller); both
// carry the batch dim first, which right-aligned broadcasting keeps there only at equal ranks.
std::pair<int, int> common_shape(LoweringContext& ctx, int a, int b) {
  if (ctx.builder.shape(a).size() != ctx.builder.shape(b).size()) {
    ctx.unsupported(ctx.op_type + " of two variable tensors of different ranks");
  }
  const int wide_a = broadcast_to_shape(ctx, a, ctx.builder.shape(b), 0);
  const int wide_b = broadcast_to_shape(ctx, b, ctx.builder.shape(wide_a), 0);
  return {wide_a, wide_b};
}

// The pick of `x` (bounded) and `other` (a constant or bounded), as ReLU nodes:
//   max: x + relu(other − x),   min: x − relu(x − other).
// `tag` keeps the node names of a variadic Min/Max apart.
Value pick_bounded(LoweringContext& ctx, Pick pick, int x, const Value& other,
                   const std::string& tag) {
  const bool is_max = pick == Pick::kMax;
  int wide = x;
  int gap = 0;  // other − x for max, x − other for min
  if (other.is_constant()) {
    const at::Tensor c = other.constant.to(ctx.param_dtype);
    wide = broadcast_to_constant(ctx, x, c);
    if (is_max) {
      const int neg = ctx.emit(make_neg(), {wide}, tag + "/neg").node;
      gap = ctx.emit(make_add_const(ctx.param(c)), {neg}, tag + "/gap").node;
    } else {
      gap = ctx.emit(make_add_const(ctx.param(-c)), {wide}, tag + "/gap").node;
    }
  } else {
    int y = 0;
    std::tie(wide, y) = common_shape(ctx, x, node_of(ctx, other));
    gap = is_max ? ctx.emit(make_sub(), {y, wide}, tag + "/gap").node
                 : ctx.emit(make_sub(), {wide, y}, tag + "/gap").node;
  }
  const int excess = ctx.emit(make_relu(), {gap}, tag + "/relu").node;
  return ctx.emit(is_max ? make_add() : make_sub(), {wide, excess}, tag);
}

// Pick of two values, either of them constant or bounded.
Value pick_of(LoweringContext& ctx, Pick pick, const Value& a, const Value& b,
              const std::string& tag) {
  if (a.is_constant() && b.is_constant()) {
    (void)checked_broadcast(ctx, {a.constant, b.constant});
    return Value::of_constant(pick == Pick::kMax ? at::maximum(a.constant, b.constant)
                                                 : at::minimum(a.constant, b.constant));
  }
  // min and max are symmetric: the bounded operand goes first.
  if (a.is_constant()) return pick_bounded(ctx, pick, node_of(ctx, b), a, tag);
  return pick_bounded(ctx, pick, node_of(ctx, a), b, tag);
}

// Min / Max: variadic, numpy broadcasting (opset 8 on), picked left to right.
Value lower_pick(LoweringContext& ctx, Pick pick) {
  if (ctx.inputs.empty()) ctx.fail("expects at least one input");
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].is_absent()) ctx.fail("missing input " + std::to_string(i));
  }
  Value acc = ctx.inputs[0];  // one input: itself (the loader refuses it where unbatched)
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    std::string tag;  // appended, not "/" + ...: g++ 12's -Wrestrict misfires on the latter
    if (ctx.inputs.size() > 2) tag.append("/").append(std::to_string(i));
    acc = pick_of(ctx, pick, acc, ctx.inputs[i], tag);
  }
  return acc;
}

// A bound of Clip: input `i` (opset 11 on; absent = none) or attribute `name` (opsets 6–10,
// default the float range's end).
Value clip_bound(const LoweringContext& ctx, size_t i, const char* name, double fallback) {
  if (ctx.has_input(i)) {
    const Value& v = ctx.inputs[i];
    if (v.is_constant() && v.constant.numel() != 1)
      ctx.fail(std::string(name) + " must be a scalar");
    return v;
  }
  if (!ctx.attrs.has(name)) return {};
  return Value::of_constant(at::tensor(ctx.attrs.get_float(name, fallback), at::kDouble));
}

// Clip(x, lo, hi) = min(max(x, lo), hi); a missing bound is no bound. When lo > hi every element
// is hi, as ONNX specifies and as min(max(·)) gives.
Value lower_clip(LoweringContext& ctx) {
  if (ctx.inputs.empty() || ctx.inputs[0].is_absent()) ctx.fail("missing input 0");
  const double big = std::numeric_limits<float>::max();
  const Value lo = clip_bound(ctx, 1, "min", -big);
  const Value hi = clip_bound(ctx, 2, "max", big);
  Value x = ctx.inputs[0];
  if (x.is_constant() && (lo.is_absent() || lo.is_constant()) &&
      (hi.is_absent() || hi.is_constant())) {
    at::Tensor out = x.constant;
    // Bounds in the input's type (an integer Clip stays integer).
    if (!lo.is_absent()) out = at::maximum(out, lo.constant.to(out.scalar_type()));
    if (!hi.is_absent()) out = at::minimum(out, hi.constant.to(out.scalar_type()));
    return Value::of_constant(out);
  }
  if (!lo.is_absent()) x = pick_of(ctx, Pick::kMax, x, lo, "/min");
  if (!hi.is_absent()) x = pick_of(ctx, Pick::kMin, x, hi, "/max");
  return x;
}

}  // namespace

void register_min_max(OpRegistry& r) {
  r.add("Min", {.first = 8}, [](LoweringContext& c) { return lower_pick(c, Pick::kMin); });
  r.add("Max", {.first = 8}, [](LoweringContext& c) { return lower_pick(c, Pick::kMax); });
  r.add("Clip", {.first = 6}, lower_clip);
}

}  // namespace distcrown::ops
