#include "distcrown/ops/batchnorm.hpp"

#include <ATen/ATen.h>

#include "distcrown/ops/register.hpp"

namespace distcrown::ops {
namespace {

class BoundBatchNorm final : public BoundNode {
 public:
  BoundBatchNorm(ParamPtr w, ParamPtr b) : w_(std::move(w)), b_(std::move(b)) {}
  std::string op_type() const override { return "BatchNormalization"; }
  bool is_affine() const override { return true; }
  std::vector<ParamPtr*> params() override { return {&w_, &b_}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() >= 2 && x[0].size(1) == w_->numel(), "BatchNormalization has ",
                w_->numel(), " channels, the input is ", x[0].sizes());
    return x[0] * w_->get() + b_->get();
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor w = w_->get();
    const at::Tensor mid = (x[0]->upper + x[0]->lower) / 2;
    const at::Tensor rad = (x[0]->upper - x[0]->lower) / 2;
    const at::Tensor center = mid * w + b_->get();
    const at::Tensor dev = rad * w.abs();
    return {center - dev, center + dev};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    const at::Tensor w = w_->get();
    const at::Tensor b = b_->get();
    return {map_sides(
        a, bias, [&](const at::Tensor& A) { return A * w; },
        [&](const at::Tensor& A) { return contract(A, b); })};
  }

 private:
  ParamPtr w_;  // [C, 1, ...]
  ParamPtr b_;  // [C, 1, ...]
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
  return ctx.emit(make_batchnorm(make_param(w.to(at::kFloat)), make_param(b.to(at::kFloat))),
                  {ctx.bounded(0)});
}

}  // namespace

NodePtr make_batchnorm(ParamPtr weight, ParamPtr bias) {
  return std::make_unique<BoundBatchNorm>(std::move(weight), std::move(bias));
}

void register_batchnorm(OpRegistry& r) { r.add("BatchNormalization", lower_batchnorm); }

}  // namespace distcrown::ops
