#include "ops/add_sub.hpp"

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/mul_div.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

// x ± y of two bounded tensors of equal rank (batch dim first in both); either may broadcast
// along the other dims (x − mean(x, keepdims) in a decomposed LayerNorm).
class BoundAddSub final : public BoundNode {
 public:
  explicit BoundAddSub(bool subtract) : subtract_(subtract) {}
  std::string op_type() const override { return subtract_ ? "Sub" : "Add"; }
  // Patches pass through unchanged only when neither input broadcasts (a residual Add); a
  // broadcast input needs A summed over its broadcast dims, which the dense step does.
  OpTraits traits() const override { return {.patches = same_shapes()}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == x[1].dim(), op_type(), " of two variable tensors needs equal ",
                "ranks, got ", x[0].sizes(), " and ", x[1].sizes());
    return subtract_ ? x[0] - x[1] : x[0] + x[1];
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    if (subtract_) return {x[0]->lower - x[1]->upper, x[0]->upper - x[1]->lower};
    return {x[0]->lower + x[1]->lower, x[0]->upper + x[1]->upper};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    if (same_shapes() && !subtract_) return {a, a};
    // A [S, B, *out] -> [S, B, *in_i]: summed over the dims input i broadcasts along.
    const auto to_input = [this](const at::Tensor& A, size_t i) {
      const std::vector<int64_t>& shape = input_shape(i);
      if (shape == output_shape()) return A;
      std::vector<int64_t> full{A.size(0), A.size(1)};
      full.insert(full.end(), shape.begin() + 1, shape.end());
      return A.sum_to_size(full);
    };
    const double sign = subtract_ ? -1.0 : 1.0;
    return {map_sides(
                a, bias, [&](const at::Tensor& A) { return to_input(A, 0); }, no_bias),
            map_sides(
                a, bias, [&](const at::Tensor& A) { return to_input(A, 1) * sign; }, no_bias)};
  }
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& /*bias*/) const override {
    if (!subtract_) return {a, a};
    return {a, map_patch_sides(a, [](const at::Tensor& A) { return -A; })};
  }

 private:
  [[nodiscard]] bool same_shapes() const {
    return !output_shape().empty() && input_shape(0) == output_shape() &&
           input_shape(1) == output_shape();
  }

  bool subtract_;
};

class BoundAddConst final : public BoundNode {
 public:
  explicit BoundAddConst(ParamPtr c) : c_(std::move(c)) {}
  std::string op_type() const override { return "Add"; }
  OpTraits traits() const override {
    return {.affine = true, .elementwise = true, .patches = true};
  }
  std::vector<ParamPtr*> params() override { return {&c_}; }
  double known_floor(std::span<const double> in) const override {
    return in[0] + c_->get().min().item<double>();  // NaN stays NaN
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    at::Tensor y = x[0] + c_->get();
    TORCH_CHECK(y.sizes() == x[0].sizes(), "the constant ", c_->get().sizes(),
                " broadcasts the variable input ", x[0].sizes(), " to a larger shape");
    return y;
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor c = c_->get();
    return {x[0]->lower + c, x[0]->upper + c};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    const at::Tensor c = c_->get();
    return {map_sides(
        a, bias, [](const at::Tensor& A) { return A; },
        [&](const at::Tensor& A) { return contract(A, c); })};
  }
  // The constant read at each row's window [R, 1, C, kh, kw] enters the bias.
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& bias) const override {
    const at::Tensor c = unfold_windows(c_->get().expand(input_shape(0)), a);
    if (a.lA.defined()) accumulate(bias.lower, window_dot(a.lA, c));
    if (a.uA.defined()) accumulate(bias.upper, window_dot(a.uA, c));
    return {a};
  }

 private:
  ParamPtr c_;
};

Value lower_add_sub(LoweringContext& ctx, bool subtract) {
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  if (ctx.all_constant()) {
    const at::Tensor& a = ctx.constant(0);
    const at::Tensor& b = ctx.constant(1);
    (void)checked_broadcast(ctx, {a, b});
    return Value::of_constant(subtract ? a - b : a + b);
  }
  const bool var0 = ctx.inputs[0].is_bounded();
  const bool var1 = ctx.inputs[1].is_bounded();
  if (var0 && var1) {
    // Both carry the batch dim first: ONNX's right-aligned broadcasting keeps it there only when
    // the ranks are equal.
    if (ctx.builder.shape(ctx.inputs[0].node).size() !=
        ctx.builder.shape(ctx.inputs[1].node).size()) {
      ctx.unsupported(std::string(subtract ? "Sub" : "Add") +
                      " of two variable tensors of different ranks");
    }
    return ctx.emit(subtract ? make_sub() : make_add(), {ctx.inputs[0].node, ctx.inputs[1].node});
  }
  // In the parameters' dtype first: the subtraction below negates it.
  const at::Tensor c = (var0 ? ctx.inputs[1] : ctx.inputs[0]).constant.to(ctx.param_dtype);
  const int x = broadcast_to_constant(ctx, var0 ? ctx.inputs[0].node : ctx.inputs[1].node, c);
  if (!subtract) return ctx.emit(make_add_const(ctx.param(c)), {x});
  if (var0) return ctx.emit(make_add_const(ctx.param(-c)), {x});  // x − c
  const Value neg = ctx.emit(make_neg(), {x}, "/neg");            // c − x
  return ctx.emit(make_add_const(ctx.param(c)), {neg.node});
}

}  // namespace

NodePtr make_add() { return std::make_unique<BoundAddSub>(false); }
NodePtr make_sub() { return std::make_unique<BoundAddSub>(true); }
NodePtr make_add_const(ParamPtr c) { return std::make_unique<BoundAddConst>(std::move(c)); }

void register_add_sub(OpRegistry& r) {
  r.add("Add", kAllOpsets, [](LoweringContext& c) { return lower_add_sub(c, false); });
  r.add("Sub", kAllOpsets, [](LoweringContext& c) { return lower_add_sub(c, true); });
}

}  // namespace distcrown::ops
