#include "distcrown/ops/relu.hpp"

#include <ATen/ATen.h>

#include "distcrown/ops/register.hpp"

namespace distcrown::ops {

ReluRelaxation relu_relaxation(const Interval& pre) {
  const at::Tensor lb_r = pre.lower.clamp_max(0);
  const at::Tensor ub_r = at::maximum(pre.upper.clamp_min(0), lb_r + 1e-8);
  ReluRelaxation r;
  r.upper_d = ub_r / (ub_r - lb_r);
  r.upper_b = -lb_r * r.upper_d;
  r.lower_d = (r.upper_d > 0.5).to(pre.lower.scalar_type());
  return r;
}

namespace {

class BoundRelu final : public BoundNode {
 public:
  std::string op_type() const override { return "Relu"; }
  bool needs_input_bounds() const override { return true; }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return at::relu(x[0]); }

  Interval ibp(std::span<const Interval* const> x) const override {
    return {at::relu(x[0]->lower), at::relu(x[0]->upper)};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    // A [S, B, *shape]; the relaxation broadcasts over S.
    const ReluRelaxation r = relu_relaxation(*bounds[0]);
    BoundA out;
    if (a.lA.defined()) {
      // Lower bound: positive coefficients take the lower line, negative ones the upper line.
      const at::Tensor pos = a.lA.clamp_min(0);
      const at::Tensor neg = a.lA.clamp_max(0);
      out.lA = pos * r.lower_d + neg * r.upper_d;
      accumulate(bias.lower, contract(neg, r.upper_b));
    }
    if (a.uA.defined()) {
      const at::Tensor pos = a.uA.clamp_min(0);
      const at::Tensor neg = a.uA.clamp_max(0);
      out.uA = pos * r.upper_d + neg * r.lower_d;
      accumulate(bias.upper, contract(pos, r.upper_b));
    }
    return {out};
  }
};

Value lower_relu(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(at::relu(ctx.constant(0)));
  return ctx.emit(make_relu(), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_relu() { return std::make_unique<BoundRelu>(); }

void register_relu(OpRegistry& r) { r.add("Relu", lower_relu); }

}  // namespace distcrown::ops
