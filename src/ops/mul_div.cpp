#include "ops/mul_div.hpp"

#include <ATen/ATen.h>

#include "distcrown/graph/bound_graph.hpp"
#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/bilinear.hpp"
#include "ops/convex.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

enum class Kind { kMul, kDiv, kNeg };

class BoundScale final : public BoundNode {
 public:
  BoundScale(Kind kind, ParamPtr c) : kind_(kind), c_(std::move(c)) {}
  std::string op_type() const override {
    return kind_ == Kind::kMul ? "Mul" : kind_ == Kind::kDiv ? "Div" : "Neg";
  }
  OpTraits traits() const override { return {.affine = true, .elementwise = true}; }
  std::vector<ParamPtr*> params() override {
    if (c_) return {&c_};
    return {};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    at::Tensor y = apply(x[0]);
    TORCH_CHECK(y.sizes() == x[0].sizes(), "the constant broadcasts the variable input ",
                x[0].sizes(), " to a larger shape ", y.sizes());
    return y;
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor a = apply(x[0]->lower);
    const at::Tensor b = apply(x[0]->upper);
    return {at::minimum(a, b), at::maximum(a, b)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, B, *shape] ⊙ c: c broadcasts right-aligned, past the spec dim.
    return {map_sides(
        a, bias, [&](const at::Tensor& A) { return apply(A); }, no_bias)};
  }

 private:
  at::Tensor apply(const at::Tensor& t) const {
    switch (kind_) {
      case Kind::kMul:
        return t * c_->get();
      case Kind::kDiv:
        return t / c_->get();
      case Kind::kNeg:
        break;
    }
    return -t;
  }
  Kind kind_;
  ParamPtr c_;
};

Value lower_mul_div(LoweringContext& ctx, bool divide) {
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  if (ctx.all_constant()) {
    const at::Tensor& a = ctx.constant(0);
    const at::Tensor& b = ctx.constant(1);
    (void)checked_broadcast(ctx, {a, b});
    if (!divide) return Value::of_constant(a * b);
    // Integers (shape arithmetic) divide as ONNX does, truncating; LibTorch's `/` would give
    // floats.
    if (at::isIntegralType(a.scalar_type(), true) && at::isIntegralType(b.scalar_type(), true)) {
      if ((b == 0).any().item<bool>()) ctx.fail("division by zero");
      return Value::of_constant(at::div(a, b, "trunc"));
    }
    return Value::of_constant(a / b);
  }
  if (ctx.inputs[0].is_bounded() && ctx.inputs[1].is_bounded()) {
    // Both carry the batch dim first: ONNX's right-aligned broadcasting keeps it there only when
    // the ranks are equal.
    if (ctx.builder.shape(ctx.inputs[0].node).size() !=
        ctx.builder.shape(ctx.inputs[1].node).size()) {
      ctx.unsupported(std::string(divide ? "Div" : "Mul") +
                      " of two variable tensors of different ranks");
    }
    // x / y = x · (1/y), as auto_LiRPA decomposes it (y must stay positive: Reciprocal).
    // A denominator known positive by construction (√(v + ε)) tells Reciprocal its floor.
    const int y = divide ? ctx.emit(make_reciprocal_of(ctx.builder.known_floor(ctx.bounded(1))),
                                    {ctx.bounded(1)}, "/reciprocal")
                               .node
                         : ctx.bounded(1);
    return ctx.emit(make_bilinear_mul(), {ctx.bounded(0), y});
  }
  if (divide) {
    if (!ctx.inputs[0].is_bounded()) ctx.unsupported("Div of a constant by a variable tensor");
    ParamPtr divisor = ctx.param(ctx.constant(1));
    if ((divisor->get() == 0).any().item<bool>()) ctx.fail("division by zero");
    const int x = broadcast_to_constant(ctx, ctx.bounded(0), ctx.constant(1));
    return ctx.emit(make_div_const(std::move(divisor)), {x});
  }
  const bool var0 = ctx.inputs[0].is_bounded();
  const at::Tensor c = (var0 ? ctx.inputs[1] : ctx.inputs[0]).constant;  // ctx.param casts
  const int x = broadcast_to_constant(ctx, var0 ? ctx.inputs[0].node : ctx.inputs[1].node, c);
  return ctx.emit(make_mul_const(ctx.param(c)), {x});
}

Value lower_neg(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(-ctx.constant(0));
  return ctx.emit(make_neg(), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_mul_const(ParamPtr c) {
  return std::make_unique<BoundScale>(Kind::kMul, std::move(c));
}
NodePtr make_div_const(ParamPtr c) {
  return std::make_unique<BoundScale>(Kind::kDiv, std::move(c));
}
NodePtr make_neg() { return std::make_unique<BoundScale>(Kind::kNeg, nullptr); }

void register_mul_div(OpRegistry& r) {
  r.add("Mul", kAllOpsets, [](LoweringContext& c) { return lower_mul_div(c, false); });
  r.add("Div", kAllOpsets, [](LoweringContext& c) { return lower_mul_div(c, true); });
  r.add("Neg", kAllOpsets, lower_neg);
}

}  // namespace distcrown::ops
