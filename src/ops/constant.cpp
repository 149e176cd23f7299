// Operators that never create graph nodes: Constant, Identity, Dropout (inference: identity),
// Cast (of a bounded tensor to a float type: the identity), and the constant-only shape
// arithmetic of exported graphs, folded at import: ConstantOfShape, Equal, Where, Expand, Range
// (e.g. a class token ConstantOfShape(Concat(Unsqueeze(Gather(Shape(x), 0)), [1], [48])) + token).
// On a tensor that depends on the perturbed input, ConstantOfShape, Equal and Range are
// unsupported; Expand lowers to the bounded Expand (ops/reshape) and Where, with a constant
// condition, to masked branches and an Add. Shape, Gather, Concat, Slice, Squeeze, Unsqueeze fold
// too, in the families that also bound them.
#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/axes.hpp"
#include "ops/mul_div.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

Value lower_constant(LoweringContext& ctx) {
  const auto& a = ctx.attrs;
  if (a.tensors.count("value")) return Value::of_constant(a.tensors.at("value"));
  if (a.floats.count("value_float")) {
    return Value::of_constant(at::scalar_tensor(a.floats.at("value_float"), at::kFloat));
  }
  if (a.ints.count("value_int")) {
    return Value::of_constant(at::scalar_tensor(a.ints.at("value_int"), at::kLong));
  }
  if (a.int_lists.count("value_ints")) {
    return Value::of_constant(at::tensor(a.int_lists.at("value_ints"), at::kLong));
  }
  ctx.unsupported("Constant without a value, value_float, value_int or value_ints attribute");
}

Value lower_identity(LoweringContext& ctx) {
  if (ctx.inputs.empty() || ctx.inputs[0].is_absent()) ctx.fail("missing input 0");
  return ctx.inputs[0];
}

Value lower_cast(LoweringContext& ctx) {
  // ONNX TensorProto data types: 1 float, 6 int32, 7 int64, 9 bool, 11 double.
  const int64_t to = ctx.attrs.get_int("to", 1);
  if (ctx.all_constant()) {
    const at::Tensor& x = ctx.constant(0);
    switch (to) {
      case 1:
        return Value::of_constant(x.to(at::kFloat));
      case 6:
        return Value::of_constant(x.to(at::kInt));
      case 7:
        return Value::of_constant(x.to(at::kLong));
      case 9:
        return Value::of_constant(x.to(at::kBool));
      case 11:
        return Value::of_constant(x.to(at::kDouble));
      default:
        ctx.unsupported("Cast to ONNX type " + std::to_string(to));
    }
  }
  if (to != 1 && to != 11) ctx.unsupported("Cast of a variable tensor to a non-float type");
  return ctx.inputs[0];
}

void require_constant_inputs(const LoweringContext& ctx) {
  if (!ctx.all_constant()) {
    ctx.unsupported(ctx.op_type + " of a tensor that depends on the perturbed input");
  }
}

Value lower_constant_of_shape(LoweringContext& ctx) {  // opsets 9+
  require_constant_inputs(ctx);
  const std::vector<int64_t> shape = int_values(ctx, 0);
  check_buildable_shape(ctx, shape);
  const auto it = ctx.attrs.tensors.find("value");
  if (it == ctx.attrs.tensors.end()) return Value::of_constant(at::zeros(shape, at::kFloat));
  const at::Tensor& value = it->second;
  if (value.numel() != 1) ctx.fail("value must hold one element");
  return Value::of_constant(value.reshape({}).expand(shape).contiguous());
}

Value lower_equal(LoweringContext& ctx) {  // opsets 7+ (numpy broadcasting)
  require_constant_inputs(ctx);
  (void)checked_broadcast(ctx, {ctx.constant(0), ctx.constant(1)});
  return Value::of_constant(at::eq(ctx.constant(0), ctx.constant(1)));
}

// Where with a constant condition and a variable branch: y = m ⊙ a + (1 − m) ⊙ b, linear in the
// branches (m the condition as 0/1): each variable branch is masked (a Mul by a constant, after
// broadcasting it to the output's shape), a constant one added as a constant.
Value lower_where_of_variables(LoweringContext& ctx) {
  if (ctx.inputs[0].is_bounded()) ctx.unsupported("Where with a variable condition");
  const at::Tensor& cond = ctx.constant(0);
  if (cond.scalar_type() != at::kBool) ctx.fail("the condition must be a bool tensor");
  const at::Tensor m = cond.to(ctx.param_dtype);
  std::vector<int> masked;
  at::Tensor constant_part;
  for (const size_t i : {size_t(1), size_t(2)}) {
    const at::Tensor mask = i == 1 ? m : 1 - m;
    if (!ctx.inputs[i].is_bounded()) {
      constant_part = mask * ctx.constant(i).to(ctx.param_dtype);
      continue;
    }
    const int x = broadcast_to_constant(ctx, ctx.inputs[i].node, mask);
    masked.push_back(ctx.emit(make_mul_const(ctx.param(mask)), {x}, "/branch").node);
  }
  if (masked.size() == 2) {
    const int a = broadcast_to_shape(ctx, masked[0], ctx.builder.shape(masked[1]), 0);
    const int b = broadcast_to_shape(ctx, masked[1], ctx.builder.shape(a), 0);
    return ctx.emit(make_add(), {a, b});
  }
  const int x = broadcast_to_constant(ctx, masked.front(), constant_part);
  return ctx.emit(make_add_const(ctx.param(constant_part)), {x});
}

Value lower_where(LoweringContext& ctx) {  // opsets 9+
  if (ctx.inputs.size() != 3) ctx.fail("expects 3 inputs");
  if (!ctx.all_constant()) return lower_where_of_variables(ctx);
  const at::Tensor& cond = ctx.constant(0);
  if (cond.scalar_type() != at::kBool) ctx.fail("the condition must be a bool tensor");
  (void)checked_broadcast(ctx, {cond, ctx.constant(1), ctx.constant(2)});
  return Value::of_constant(at::where(cond, ctx.constant(1), ctx.constant(2)));
}

Value lower_expand(LoweringContext& ctx) {  // opsets 8+: bidirectional broadcasting
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  const std::vector<int64_t> shape = int_values(ctx, 1);
  for (const int64_t d : shape) {
    if (d < 0) ctx.fail("negative dimension " + std::to_string(d));
  }
  if (ctx.inputs[0].is_bounded()) {
    // A variable input: the same broadcast as a constant of the target shape would give it.
    const int64_t held = c10::multiply_integers(ctx.builder.shape(ctx.bounded(0)));
    return Value::of_node(broadcast_to_shape(ctx, ctx.bounded(0), shape, held));
  }
  require_constant_inputs(ctx);
  const at::Tensor& x = ctx.constant(0);
  const std::vector<int64_t> out = checked_broadcast(ctx, {x.sizes().vec(), shape}, x.numel());
  return Value::of_constant(x.expand(out).contiguous());
}

Value lower_range(LoweringContext& ctx) {  // opsets 11+
  require_constant_inputs(ctx);
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.constant(i).numel() != 1) ctx.fail("start, limit and delta must be scalars");
  }
  const at::Tensor& start = ctx.constant(0);
  const at::ScalarType type = start.scalar_type();
  // number_of_elements = max(ceil((limit - start) / delta), 0); element i = start + i·delta.
  const double s = start.item<double>();
  const double limit = ctx.constant(1).item<double>();
  const double delta = ctx.constant(2).item<double>();
  if (delta == 0 || !std::isfinite(s) || !std::isfinite(limit) || !std::isfinite(delta)) {
    ctx.fail("Range needs a finite start and limit and a nonzero finite delta");
  }
  const double count = std::max(std::ceil((limit - s) / delta), 0.0);
  if (count > double(kMaxBuiltElements))
    ctx.unsupported("a tensor of more than 2^24 elements built from shape values");
  const auto n = int64_t(count);
  if (at::isIntegralType(type, /*includeBool=*/false)) {
    const int64_t s0 = start.item<int64_t>();
    const int64_t d = ctx.constant(2).item<int64_t>();
    return Value::of_constant((at::arange(n, at::kLong) * d + s0).to(type));
  }
  return Value::of_constant((at::arange(n, at::kDouble) * delta + s).to(type));
}

}  // namespace

void register_constant(OpRegistry& r) {
  r.add("Constant", kAllOpsets, lower_constant);
  r.add("Identity", kAllOpsets, lower_identity);
  r.add("Dropout", kAllOpsets, lower_identity);
  r.add("Cast", kAllOpsets, lower_cast);
  r.add("ConstantOfShape", {.first = 9}, lower_constant_of_shape);
  r.add("Equal", {.first = 7}, lower_equal);
  r.add("Where", {.first = 9}, lower_where);
  r.add("Expand", {.first = 8}, lower_expand);
  r.add("Range", {.first = 11}, lower_range);
}

}  // namespace distcrown::ops
