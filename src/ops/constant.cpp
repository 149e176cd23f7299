// Constant, Identity, Dropout (inference: identity) and Cast. They never create graph nodes:
// constants are folded at import, identities alias their input.
#include <ATen/ATen.h>

#include "distcrown/ops/register.hpp"

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

}  // namespace

void register_constant(OpRegistry& r) {
  r.add("Constant", lower_constant);
  r.add("Identity", lower_identity);
  r.add("Dropout", lower_identity);
  r.add("Cast", lower_cast);
}

}  // namespace distcrown::ops
