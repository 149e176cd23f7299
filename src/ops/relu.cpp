#include "ops/relu.hpp"

#include <cmath>
#include <functional>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/util/error.hpp"
#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/mul_div.hpp"
#include "util/recompute.hpp"

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

// A ReLU step on lA and uA ([S, B, ...], either undefined): the lower line's slope is α (one per
// side; undefined: CROWN's 0/1) where the neuron is unstable, CROWN's exact 0/1 where it is
// stable (α cannot change a stable neuron's line). `read` maps a relaxation tensor [B, *shape] to
// what multiplies A (dense: itself, broadcast over S; patches: each row's window), `dot`
// contracts a coefficient tensor with it per row ([S, B]). A recomputed step
// (util/recompute.hpp): under α-/β-CROWN's autograd it keeps A, α and the input bounds, not its
// A-sized intermediates (the clamped A, the read slopes and intercepts).
template <class Read, class Dot>
std::pair<at::Tensor, at::Tensor> relaxed_sides(const at::Tensor& lA, const at::Tensor& uA,
                                                const Interval& pre, const RelaxParams& p,
                                                BiasPair& bias, const Read& read, Dot dot) {
  // Inputs: the bounds, then each defined side's A and α. α given unread (RelaxParams::source_l,
  // read_l) is read inside the step: the step then keeps α's storage, not a copy as large as A.
  const bool has_l = lA.defined();
  const bool has_u = uA.defined();
  const at::Tensor& given_l = p.source_l.defined() ? p.source_l : p.alpha_l;
  const at::Tensor& given_u = p.source_u.defined() ? p.source_u : p.alpha_u;
  const bool alpha_l = has_l && given_l.defined();
  const bool alpha_u = has_u && given_u.defined();
  std::vector<at::Tensor> in{pre.lower, pre.upper};
  if (has_l) in.push_back(lA);
  if (alpha_l) in.push_back(given_l);
  if (has_u) in.push_back(uA);
  if (alpha_u) in.push_back(given_u);
  using Reader = std::function<at::Tensor(const at::Tensor&)>;
  const Reader read_l = p.source_l.defined() ? p.read_l : Reader();
  const Reader read_u = p.source_u.defined() ? p.read_u : Reader();
  const auto step = [=](const std::vector<at::Tensor>& x) {
    const Interval b{x[0], x[1]};
    const ReluRelaxation r = relu_relaxation(b);
    const at::Tensor lower_d = read(r.lower_d);
    const at::Tensor upper_d = read(r.upper_d);
    const at::Tensor upper_b = read(r.upper_b);
    at::Tensor unstable;
    if (alpha_l || alpha_u) {
      unstable = read(((b.lower < 0) & (b.upper > 0)).to(b.lower.scalar_type())) > 0.5;
    }
    size_t k = 2;
    std::vector<at::Tensor> out(4);  // lA', bias term of lA, uA', bias term of uA
    if (has_l) {
      const at::Tensor& A = x[k++];
      const at::Tensor slope =
          alpha_l ? at::where(unstable, read_l ? read_l(x[k++]) : x[k++], lower_d) : lower_d;
      out[0] = relax_side(A, slope, upper_d, upper_b, out[1], false, dot);
    }
    if (has_u) {
      const at::Tensor& A = x[k++];
      const at::Tensor slope =
          alpha_u ? at::where(unstable, read_u ? read_u(x[k++]) : x[k++], lower_d) : lower_d;
      out[2] = relax_side(A, upper_d, slope, upper_b, out[3], true, dot);
    }
    // recomputed() returns defined tensors only: an absent side travels as an empty tensor.
    for (at::Tensor& t : out) {
      if (!t.defined()) t = at::empty({0}, b.lower.options());
    }
    return out;
  };
  std::vector<at::Tensor> got = recomputed(step, in);
  if (has_l) accumulate(bias.lower, got[1]);
  if (has_u) accumulate(bias.upper, got[3]);
  return {has_l ? got[0] : at::Tensor(), has_u ? got[2] : at::Tensor()};
}

at::Tensor as_is(const at::Tensor& t) { return t; }

class BoundRelu final : public BoundNode {
 public:
  std::string op_type() const override { return "Relu"; }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splittable = true,
            .patches = true,
            .reads_alpha_source = true};
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
    // The windows' geometry without A's coefficients (the step keeps A as its input).
    const auto [kh, kw] = a.kernel();
    const PatchesA geometry = a.with(at::empty({a.rows(), 0, 0, kh, kw}), {});
    const auto read = [geometry](const at::Tensor& t) { return unfold_windows(t, geometry); };
    auto [l, u] = relaxed_sides(a.lA, a.uA, *bounds[0], p, bias, read, window_dot);
    return {a.with(std::move(l), std::move(u))};
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
    // A [S, B, *shape]; the relaxation broadcasts over S. Lower bound: positive coefficients take
    // the lower line, negative ones the upper line (the upper side the other way round).
    BoundA out;
    std::tie(out.lA, out.uA) = relaxed_sides(a.lA, a.uA, *bounds[0], p, bias, as_is, contract);
    // β-CROWN: min f ≥ min (f + β·s·z) over the box when s·z ≤ 0 on the domain and β ≥ 0.
    if (out.lA.defined() && p.beta_l.defined()) out.lA = out.lA + p.beta_l;
    if (out.uA.defined() && p.beta_u.defined()) out.uA = out.uA - p.beta_u;
    return {out};
  }
};

Value lower_relu(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(at::relu(ctx.constant(0)));
  return ctx.emit(make_relu(), {ctx.bounded(0)});
}

// LeakyRelu(x) = α·x + (1 − α)·Relu(x), exactly, for any α. Its relaxation is then LeakyRelu's
// own (for 0 ≤ α < 1: the chord above, below the lines through 0 of slope α + (1 − α)·[0, 1] =
// [α, 1], α-CROWN over them), and branch and bound splits it at 0 as the ReLU it holds.
Value lower_leaky_relu(LoweringContext& ctx) {
  const double alpha = ctx.attrs.get_float("alpha", 0.01);
  if (!std::isfinite(alpha)) ctx.fail("alpha is not finite");
  if (ctx.all_constant()) return Value::of_constant(at::leaky_relu(ctx.constant(0), alpha));
  const int x = ctx.bounded(0);
  const int relu = ctx.emit(make_relu(), {x}, "/relu").node;
  if (alpha == 0) return Value::of_node(relu);
  const auto scalar = [&](double v) { return ctx.param(at::tensor(v, at::kDouble)); };
  const int bent = ctx.emit(make_mul_const(scalar(1 - alpha)), {relu}, "/bent").node;
  const int straight = ctx.emit(make_mul_const(scalar(alpha)), {x}, "/straight").node;
  return ctx.emit(make_add(), {straight, bent});
}

}  // namespace

NodePtr make_relu() { return std::make_unique<BoundRelu>(); }

void register_relu(OpRegistry& r) {
  r.add("Relu", kAllOpsets, lower_relu);
  r.add("LeakyRelu", kAllOpsets, lower_leaky_relu);
}

}  // namespace distcrown::ops
