#include "distcrown/ops/relu.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/graph/op_registry.hpp"
#include "distcrown/util/error.hpp"

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

// A [S, B, *shape] -> pos·d_pos + neg·d_neg; the intercept b_u enters the bias through the
// coefficients that take the upper line (negative ones for the lower bound, positive for the
// upper).
// `dot` (contract or window_dot) sums a coefficient tensor times upper_b per row: [S, B].
template <class Dot = at::Tensor (*)(const at::Tensor&, const at::Tensor&)>
at::Tensor relax_side(const at::Tensor& A, const at::Tensor& d_pos, const at::Tensor& d_neg,
                      const at::Tensor& upper_b, at::Tensor& bias, bool upper_side,
                      Dot dot = contract) {
  at::Tensor pos = A.clamp_min(0);
  // A − pos rather than clamp_max: autograd then treats A == 0 as positive only (clamp's gradient
  // passes at the boundary on both sides, giving d_pos + d_neg there). auto_LiRPA's
  // ClampedMultiplication uses this convention; the values are the same, and α-CROWN's
  // optimisation path on convolutional nets (many exact zeros in A) follows auto_LiRPA's.
  at::Tensor neg = A - pos;
  accumulate(bias, dot(upper_side ? pos : neg, upper_b));
  if (at::GradMode::is_enabled()) return pos * d_pos + neg * d_neg;  // autograd: no in-place
  pos.mul_(d_pos);
  neg.mul_(d_neg);
  pos.add_(neg);
  return pos;
}

// The lower-line slope of one side: α ([S, B, *shape] or broadcastable) where the neuron is
// unstable, CROWN's 0/1 where it is stable (α cannot change a stable neuron's exact line).
at::Tensor side_slope(const ReluRelaxation& r, const Interval& pre, const at::Tensor& alpha) {
  if (!alpha.defined()) return r.lower_d;
  const at::Tensor unstable = (pre.lower < 0) & (pre.upper > 0);  // [B, *shape]
  return at::where(unstable, alpha, r.lower_d);
}

class BoundRelu final : public BoundNode {
 public:
  std::string op_type() const override { return "Relu"; }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splittable = true,
            .patches = true};
  }

  // Patches [R, B, C, kh, kw]: the relaxation read at each row's window (auto_LiRPA unfolds it
  // the same way); zero slopes outside the node mask the window.
  std::vector<PatchesA> backward_patches(const PatchesA& a, std::span<const Interval* const> bounds,
                                         BiasPair& bias) const override {
    return backward_patches_relaxed(a, bounds, bias, RelaxParams{});
  }

  // α (RelaxationHook::window_params) arrives read at the windows, [R, B, C, kh, kw]: it takes
  // the lower line where the neuron under the window is unstable. β (split multipliers) needs a
  // dense A: hooks with β do not take patches.
  std::vector<PatchesA> backward_patches_relaxed(const PatchesA& a,
                                                 std::span<const Interval* const> bounds,
                                                 BiasPair& bias,
                                                 const RelaxParams& p) const override {
    if (p.beta_l.defined() || p.beta_u.defined()) {
      throw Error("internal: split multipliers (beta) on a patches A");
    }
    const Interval& pre = *bounds[0];
    const ReluRelaxation r = relu_relaxation(pre);
    const at::Tensor lower_d = unfold_windows(r.lower_d, a);
    const at::Tensor upper_d = unfold_windows(r.upper_d, a);
    const at::Tensor upper_b = unfold_windows(r.upper_b, a);
    at::Tensor unstable;  // [R, B, C, kh, kw], false outside the node
    if (p.alpha_l.defined() || p.alpha_u.defined()) {
      const at::Tensor u = (pre.lower < 0) & (pre.upper > 0);
      unstable = unfold_windows(u.to(pre.lower.scalar_type()), a) > 0.5;
    }
    const auto slope = [&](const at::Tensor& alpha) {
      return alpha.defined() ? at::where(unstable, alpha, lower_d) : lower_d;
    };
    PatchesA out = a.with({}, {});
    if (a.lA.defined()) {
      out.lA = relax_side(a.lA, slope(p.alpha_l), upper_d, upper_b, bias.lower, false, window_dot);
    }
    if (a.uA.defined()) {
      out.uA = relax_side(a.uA, upper_d, slope(p.alpha_u), upper_b, bias.upper, true, window_dot);
    }
    return {out};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return at::relu(x[0]); }

  Interval ibp(std::span<const Interval* const> x) const override {
    return {at::relu(x[0]->lower), at::relu(x[0]->upper)};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return relu_relaxation(in).lower_d;  // [B, *shape]
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    // A [S, B, *shape]; the relaxation broadcasts over S.
    const Interval& pre = *bounds[0];
    const ReluRelaxation r = relu_relaxation(pre);
    BoundA out;
    // Lower bound: positive coefficients take the lower line, negative ones the upper line (the
    // upper side the other way round). In-place products keep at most two A-sized temporaries.
    if (a.lA.defined()) {
      out.lA =
          relax_side(a.lA, side_slope(r, pre, p.alpha_l), r.upper_d, r.upper_b, bias.lower, false);
      // β-CROWN: min f ≥ min (f + β·s·z) over the box when s·z ≤ 0 on the domain and β ≥ 0.
      if (p.beta_l.defined()) out.lA = out.lA + p.beta_l;
    }
    if (a.uA.defined()) {
      out.uA =
          relax_side(a.uA, r.upper_d, side_slope(r, pre, p.alpha_u), r.upper_b, bias.upper, true);
      if (p.beta_u.defined()) out.uA = out.uA - p.beta_u;
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

void register_relu(OpRegistry& r) { r.add("Relu", kAllOpsets, lower_relu); }

}  // namespace distcrown::ops
