#include "ops/batchnorm.hpp"

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/affine.hpp"

namespace distcrown::ops {
namespace {

class BoundBatchNorm final : public AffineOp {
 public:
  using AffineOp::AffineOp;
  std::string op_type() const override { return "BatchNormalization"; }
  OpTraits traits() const override {
    return {.affine = true, .elementwise = true, .patches = true};
  }

  // Patches [R, B, C, kh, kw]: the per-channel scale and shift read at each row's window (zero
  // outside the node, which masks the window).
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& bias_acc) const override {
    const auto& in = input_shape(0);  // [1, C, H, W]
    const at::Tensor w = unfold_windows(weight().expand(in), a);
    const at::Tensor b = bias();
    const at::Tensor shift = b.defined() ? unfold_windows(b.expand(in), a) : at::Tensor();
    const auto side = [&](const at::Tensor& A, at::Tensor& acc) {
      if (shift.defined()) accumulate(acc, window_dot(A, shift));
      return A * w;
    };
    if (a.lA.defined() && a.lA.is_same(a.uA)) {
      at::Tensor m = side(a.lA, bias_acc.lower);
      if (shift.defined()) accumulate(bias_acc.upper, window_dot(a.lA, shift));
      return {a.with(m, m)};
    }
    return {a.with(a.lA.defined() ? side(a.lA, bias_acc.lower) : at::Tensor(),
                   a.uA.defined() ? side(a.uA, bias_acc.upper) : at::Tensor())};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    const int64_t channels = weight_numel();
    TORCH_CHECK(x[0].dim() >= 2 && x[0].size(1) == channels, "BatchNormalization has ", channels,
                " channels, the input is ", x[0].sizes());
    return AffineOp::forward(x);
  }

 private:
  // x [B, C, *spatial] · w [C, 1, ...] (+ b [C, 1, ...]).
  at::Tensor apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const override {
    return b.defined() ? x * w + b : x * w;
  }
  at::Tensor map_a(const at::Tensor& A, const at::Tensor& w) const override { return A * w; }
  at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) const override {
    return contract(A, b);
  }
};

Value lower_batchnorm(LoweringContext& ctx) {
  if (ctx.attrs.get_int("training_mode", 0) != 0) ctx.unsupported("training_mode=1");
  const double eps = ctx.attrs.get_float("epsilon", 1e-5);
  const at::Tensor gamma = ctx.constant(1).to(at::kDouble);
  const at::Tensor beta = ctx.constant(2).to(at::kDouble);
  const at::Tensor mean = ctx.constant(3).to(at::kDouble);
  const at::Tensor var = ctx.constant(4).to(at::kDouble);
  const int64_t C = gamma.numel();
  if (beta.numel() != C || mean.numel() != C || var.numel() != C) {
    ctx.fail("scale, B, mean and var must all have C elements");
  }
  const Value& x = ctx.inputs.at(0);
  const auto rank =
      int64_t(x.is_constant() ? x.constant.dim() : int64_t(ctx.builder.shape(x.node).size()));
  std::vector<int64_t> param_shape{C};
  for (int64_t i = 2; i < rank; ++i) param_shape.push_back(1);
  const at::Tensor w = (gamma / at::sqrt(var + eps)).reshape(param_shape);
  const at::Tensor b = beta.reshape(param_shape) - mean.reshape(param_shape) * w;
  if (ctx.all_constant()) {
    const at::Tensor& xc = ctx.constant(0);
    return Value::of_constant((xc * w + b).to(xc.scalar_type()));
  }
  return ctx.emit(make_batchnorm(ctx.param(w), ctx.param(b)), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_batchnorm(ParamPtr weight, ParamPtr bias) {
  return std::make_unique<BoundBatchNorm>(std::move(weight), std::move(bias));
}

void register_batchnorm(OpRegistry& r) { r.add("BatchNormalization", kAllOpsets, lower_batchnorm); }

}  // namespace distcrown::ops
