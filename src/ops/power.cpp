// Powers with a constant exponent: Pow (x^n for an integer n ≥ 2; n = 1 is the identity and
// n = 0.5 is Sqrt) and Sqrt. Linear relaxations as auto_LiRPA's BoundPow (operators/nonlinear.py)
// and BoundSqrt (operators/convex_concave.py) at bfb7997, per neuron with input bounds [l, u]
// ([batch, *shape]):
//   x^n, n even (convex, minimum at 0)
//     upper  the chord l→u
//     lower  the tangent at t ∈ [l, u]; CROWN takes t = (l + u)/2 on a one-signed interval and
//            t = 0 (the zero line) on one straddling 0, as auto_LiRPA's branch case does
//   x^n, n odd (concave below 0, convex above: an S-shape with its inflection at 0)
//     l ≥ 0  lower = tangent at t ∈ [l, u] (CROWN: the midpoint), upper = chord
//     u ≤ 0  upper = tangent at t ∈ [l, u] (CROWN: the midpoint), lower = chord
//     l < 0 < u  lower = the chord when its slope exceeds f'(u), else the tangent at a point
//                t ≥ d_lo = l / c_n, whose tangent stays below x^n down to l; upper = the chord
//                when its slope exceeds f'(l), else the tangent at t ≤ d_up = u / c_n
//     auto_LiRPA reads d_lo / d_up from a table built by bisection; x^n is homogeneous, so the
//     tangent at d > 0 meets x^n again exactly at c_n·d, where c_n < −1 is the negative root of
//     x^n − n·x + (n − 1) (c_3 = −2). We compute c_n once by bisection and shrink it by 1e-6
//     (relative) so the tangent is valid with a margin, as the table's next grid point gives.
//   √x (concave, increasing, on x ≥ 0)
//     upper  the tangent at t ∈ [l, u] (CROWN: the midpoint; t is kept ≥ 1e-12 so the slope
//            stays finite: a tangent at any t > 0 lies above √x on x ≥ 0)
//     lower  the chord l→u
// α-CROWN optimises the tangent points (Pow: P = [2, batch, *shape], the lower line's point and
// the upper line's; Sqrt: P = [batch, *shape]), projected before each use onto the ranges above.
// Sqrt needs l ≥ 0: an interval reaching below 0 is a NumericError (as Reciprocal for l ≤ 0).
// Where the input has a known floor f ≥ 0 (GraphBuilder::known_floor: x², a mean of squares + ε)
// the input interval is clamped at f first: every real input satisfies it, while CROWN's
// intermediate bounds (not intersected with IBP) may reach below.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/util/error.hpp"
#include "ops/power.hpp"
#include "tangent_point.hpp"

namespace distcrown::ops {
namespace {

// The negative root of x^n − n·x + (n − 1) for odd n ≥ 3: it lies in (−4, −1) (the polynomial is
// positive on [−1, 0] and increasing below −1).
double odd_power_touch_ratio(int64_t n) {
  const auto g = [n](double x) { return std::pow(x, double(n)) - double(n) * x + double(n - 1); };
  double lo = -4.0;
  double hi = -1.0;
  for (int i = 0; i < 200; ++i) {
    const double m = (lo + hi) / 2;
    (g(m) < 0 ? lo : hi) = m;
  }
  return hi * (1 - 1e-6);  // less negative: the tangent point moves away from 0 (safe side)
}

// Index of each tangent point in P = [2, batch, *shape].
enum PowPoint : int64_t { kLowerPoint = 0, kUpperPoint = 1 };

class BoundPow final : public BoundNode {
 public:
  explicit BoundPow(int64_t n) : n_(n), touch_(n % 2 == 1 ? odd_power_touch_ratio(n) : 0.0) {}
  std::string op_type() const override { return "Pow"; }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splits_anywhere = true};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return f(x[0]); }

  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor fl = f(x[0]->lower);
    const at::Tensor fu = f(x[0]->upper);
    if (odd()) return {fl, fu};
    const at::Tensor straddle = (x[0]->lower < 0) & (x[0]->upper > 0);
    return {at::where(straddle, at::zeros_like(fl), at::minimum(fl, fu)), at::maximum(fl, fu)};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  double known_floor(std::span<const double> in) const override {
    if (in[0] >= 0) return std::pow(in[0], double(n_));  // increasing on x ≥ 0
    return odd() ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return crown_points(in);  // [2, B, *shape]
  }

  void project_relaxation_params(at::Tensor& alpha, const Interval& in) const override {
    // alpha [2, rows, 2, B, *shape]; the ranges broadcast over the first two dims.
    const Ranges r = ranges(in);
    at::Tensor lo = alpha.select(2, kLowerPoint);
    lo.copy_(at::minimum(at::maximum(lo, r.lower_min), r.lower_max));
    at::Tensor up = alpha.select(2, kUpperPoint);
    up.copy_(at::minimum(at::maximum(up, r.upper_min), r.upper_max));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    const Interval& pre = *bounds[0];
    return {relax_elementwise(
        a, bias, p.alpha_l, p.alpha_u, [&](const at::Tensor& tp) { return lines(pre, tp); },
        /*may_overflow=*/true)};
  }

 private:
  [[nodiscard]] bool odd() const { return n_ % 2 == 1; }
  [[nodiscard]] at::Tensor f(const at::Tensor& x) const { return at::pow(x, n_); }
  [[nodiscard]] at::Tensor df(const at::Tensor& x) const { return double(n_) * at::pow(x, n_ - 1); }

  // Where each tangent point may lie, per neuron ([B, *shape] each).
  struct Ranges {
    at::Tensor lower_min, lower_max, upper_min, upper_max;
  };
  [[nodiscard]] Ranges ranges(const Interval& in) const {
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    if (!odd()) return {l, u, l, u};
    // Straddling neurons: the lower line's tangent point at or beyond d_lo > 0, the upper
    // line's at or before d_up < 0 (where those exceed u, resp. precede l, the point itself).
    const at::Tensor straddle = (l < 0) & (u > 0);
    const at::Tensor d_lo = l / touch_;
    const at::Tensor d_up = u / touch_;
    return {at::where(straddle, d_lo, l), at::where(straddle, at::maximum(u, d_lo), u),
            at::where(straddle, at::minimum(l, d_up), l), at::where(straddle, d_up, u)};
  }

  // CROWN's tangent points: [2, B, *shape].
  [[nodiscard]] at::Tensor crown_points(const Interval& in) const {
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const at::Tensor mid = (l + u) / 2;
    const at::Tensor straddle = (l < 0) & (u > 0);
    if (!odd()) return at::stack({at::where(straddle, at::zeros_like(mid), mid), mid});
    return at::stack({at::where(straddle, l / touch_, mid), at::where(straddle, u / touch_, mid)});
  }

  // The relaxation for bounds `pre`, with tangent points `tp` ([rows, 2, B, *shape], projected)
  // or CROWN's when undefined.
  [[nodiscard]] ElementwiseLines lines(const Interval& pre, const at::Tensor& tp) const {
    const at::Tensor& l = pre.lower;
    const at::Tensor& u = pre.upper;
    const at::Tensor points = tp.defined() ? tp : crown_points(pre);
    const int64_t dim = tp.defined() ? 1 : 0;
    const at::Tensor t_lo = points.select(dim, kLowerPoint);
    const at::Tensor t_up = points.select(dim, kUpperPoint);
    const auto tangent = [this](const at::Tensor& t) { return tangent_line(t, f(t), df(t)); };
    const auto [ck, cb] = chord(l, u, f(l), f(u));
    const auto [lk, lb] = tangent(t_lo);
    ElementwiseLines out;
    if (!odd()) {
      out.lower_k = lk;
      out.lower_b = lb;
      out.upper_k = ck;
      out.upper_b = cb;
      return out;
    }
    const auto [uk, ub] = tangent(t_up);
    const at::Tensor pos = l >= 0;
    const at::Tensor neg = (u <= 0) & pos.logical_not();
    const at::Tensor straddle = (pos | neg).logical_not();
    // Lower line: the tangent where convex on [l, u] or where the chord would cross f near u.
    const at::Tensor lower_chord = neg | (straddle & (ck > df(u)));
    out.lower_k = at::where(lower_chord, ck, lk.expand_as(lb));
    out.lower_b = at::where(lower_chord, cb, lb);
    const at::Tensor upper_chord = pos | (straddle & (ck > df(l)));
    out.upper_k = at::where(upper_chord, ck, uk.expand_as(ub));
    out.upper_b = at::where(upper_chord, cb, ub);
    return out;
  }

  int64_t n_;
  double touch_;  // c_n (odd n): the tangent at d > 0 lies below x^n on [c_n·d, ∞)
};

constexpr double kSqrtMinPoint = 1e-12;

class BoundSqrt final : public TangentPointElementwise {
 public:
  explicit BoundSqrt(std::optional<double> input_floor = std::nullopt)
      : TangentPointElementwise(Direction::kNonDecreasing, input_floor) {}
  std::string op_type() const override { return "Sqrt"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::sqrt(x); }

  double known_floor(std::span<const double> in) const override {
    return std::sqrt(std::max({in[0] >= 0 ? in[0] : 0.0, input_floor().value_or(-1.0), 0.0}));
  }

 private:
  void require_domain(const Interval& in) const override {
    if (!(in.lower >= 0).all().item<bool>()) {
      throw NumericError("Sqrt of an input interval that reaches below 0 (lower bound " +
                         std::to_string(in.lower.min().item<double>()) +
                         "): only non-negative inputs are supported");
    }
  }

  ElementwiseLines lines(const Interval& pre, const at::Tensor& t_given) const override {
    const at::Tensor& l = pre.lower;
    const at::Tensor& u = pre.upper;
    const at::Tensor t = (t_given.defined() ? t_given : (l + u) / 2).clamp_min(kSqrtMinPoint);
    const at::Tensor st = at::sqrt(t);
    ElementwiseLines out;
    out.upper_k = 0.5 / st;
    out.upper_b = st / 2;  // √t − k·t
    std::tie(out.lower_k, out.lower_b) = chord(l, u, at::sqrt(l), at::sqrt(u));
    return out;
  }
};

// Pow(x, p) with p a constant scalar (or a tensor of one value).
Value lower_pow(LoweringContext& ctx) {
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  if (ctx.all_constant()) return Value::of_constant(at::pow(ctx.constant(0), ctx.constant(1)));
  if (!ctx.inputs[1].is_constant()) ctx.unsupported("Pow with a variable exponent");
  const at::Tensor p = ctx.constant(1).to(at::kDouble);
  if (p.numel() == 0 || !(p == p.reshape({-1})[0]).all().item<bool>()) {
    ctx.unsupported("Pow with an exponent tensor of several values");
  }
  const double e = p.reshape({-1})[0].item<double>();
  const int x = ctx.bounded(0);
  if (e == 1.0) return Value::of_node(x);
  if (e == 0.5) return ctx.emit(make_sqrt_of(ctx.builder.known_floor(x)), {x});
  if (e >= 2.0 && e <= 64.0 && e == std::floor(e)) return ctx.emit(make_pow(int64_t(e)), {x});
  ctx.unsupported("Pow with exponent " + std::to_string(e) +
                  " (supported: integers 1 to 64, and 0.5)");
}

}  // namespace

NodePtr make_pow(int64_t n) { return std::make_unique<BoundPow>(n); }
NodePtr make_sqrt() { return std::make_unique<BoundSqrt>(); }
NodePtr make_sqrt_at_least(double input_floor) {
  return std::make_unique<BoundSqrt>(std::max(input_floor, 0.0));
}
NodePtr make_sqrt_of(double known_floor) {
  // Shrunk by 1e-6 (relative) so float rounding of the input never falls below it.
  if (known_floor >= 0) return make_sqrt_at_least(known_floor * (1 - 1e-6));
  return make_sqrt();
}

void register_power(OpRegistry& r) {
  r.add("Pow", kAllOpsets, lower_pow);
  r.add("Sqrt", kAllOpsets, [](LoweringContext& ctx) {
    if (ctx.all_constant()) return Value::of_constant(at::sqrt(ctx.constant(0)));
    const int x = ctx.bounded(0);
    return ctx.emit(make_sqrt_of(ctx.builder.known_floor(x)), {x});
  });
}

}  // namespace distcrown::ops
