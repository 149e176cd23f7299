// Constant, Identity, Dropout (inference: identity), Cast, and the shape arithmetic that exported
// graphs do on constants (Gather, Concat, Slice; e.g. Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape for `x.view(x.size(0), -1)`). They never create graph nodes: constants are folded at
// import, identities alias their input; Gather/Concat/Slice of a variable tensor are refused.
#include <algorithm>

#include <ATen/ATen.h>

#include "distcrown/graph/op_registry.hpp"

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
  // ONNX TensorProto data types: 1 float, 6 int32, 7 int64, 11 double.
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
      case 11:
        return Value::of_constant(x.to(at::kDouble));
      default:
        ctx.unsupported("Cast to ONNX type " + std::to_string(to));
    }
  }
  if (to != 1 && to != 11) ctx.unsupported("Cast of a variable tensor to a non-float type");
  return ctx.inputs[0];
}

int64_t normalised_axis(const LoweringContext& ctx, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    ctx.fail("axis " + std::to_string(axis) + " out of range");
  return a;
}

void require_constant_inputs(const LoweringContext& ctx) {
  if (!ctx.all_constant()) {
    ctx.unsupported(ctx.op_type + " of a tensor that depends on the perturbed input");
  }
}

Value lower_gather(LoweringContext& ctx) {
  require_constant_inputs(ctx);
  const at::Tensor& data = ctx.constant(0);
  at::Tensor idx = ctx.constant(1).to(at::kLong);
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), data.dim());
  idx = at::where(idx < 0, idx + data.size(axis), idx);  // ONNX allows negative indices
  if (idx.numel() > 0 &&
      (idx.min().item<int64_t>() < 0 || idx.max().item<int64_t>() >= data.size(axis))) {
    ctx.fail("index out of range");
  }
  // Output shape: data.shape[:axis] + idx.shape + data.shape[axis+1:].
  std::vector<int64_t> shape(data.sizes().begin(), data.sizes().begin() + axis);
  shape.insert(shape.end(), idx.sizes().begin(), idx.sizes().end());
  shape.insert(shape.end(), data.sizes().begin() + axis + 1, data.sizes().end());
  return Value::of_constant(data.index_select(axis, idx.reshape({-1})).reshape(shape));
}

Value lower_concat(LoweringContext& ctx) {
  require_constant_inputs(ctx);
  if (ctx.inputs.empty()) ctx.fail("expects at least one input");
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) parts.push_back(ctx.constant(i));
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), parts.front().dim());
  return Value::of_constant(at::cat(parts, axis));
}

Value lower_slice(LoweringContext& ctx) {
  require_constant_inputs(ctx);
  at::Tensor x = ctx.constant(0);
  auto ints = [&](size_t i) {
    const at::Tensor t = ctx.constant(i).to(at::kLong).contiguous();
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  const std::vector<int64_t> starts = ints(1);
  const std::vector<int64_t> ends = ints(2);
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    axes = ints(3);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  std::vector<int64_t> steps = ctx.has_input(4) ? ints(4) : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    ctx.fail("starts, ends, axes and steps must have the same length");
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] <= 0) ctx.unsupported("Slice with a non-positive step");
    const int64_t axis = normalised_axis(ctx, axes[i], x.dim());
    const int64_t n = x.size(axis);
    auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
    x = x.slice(axis, clampi(starts[i]), clampi(ends[i]), steps[i]);
  }
  return Value::of_constant(x.contiguous());
}

}  // namespace

void register_constant(OpRegistry& r) {
  r.add("Constant", kAllOpsets, lower_constant);
  r.add("Identity", kAllOpsets, lower_identity);
  r.add("Dropout", kAllOpsets, lower_identity);
  r.add("Cast", kAllOpsets, lower_cast);
  r.add("Gather", kAllOpsets, lower_gather);
  r.add("Concat", kAllOpsets, lower_concat);
  r.add("Slice", {.first = 10}, lower_slice);
}

}  // namespace distcrown::ops
