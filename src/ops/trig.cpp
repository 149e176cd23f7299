// Sin and Cos of a bounded tensor. cos(x) = sin(x + π/2): both are f(x) = sin(x + φ) with phase
// φ = 0 or π/2, bounded as auto_LiRPA's BoundSin / BoundCos (operators/trigonometric.py at
// bfb7997), per neuron with input bounds [l, u] ([batch, *shape]):
//   IBP    exact: f(l) and f(u), with 1 where [l, u] holds a maximum π/2 − φ + 2πn and −1 where
//          it holds a minimum 3π/2 − φ + 2πn, for any width (as auto_LiRPA's check_crossing)
//   CROWN  a slope per line, then the tightest intercept for that slope: for slope k,
//          b_lower = min over [l, u] of f(x) − k·x and b_upper = the max. Those are exact: the
//          extremes of f(x) − k·x lie at l, u or where f'(x) = k, i.e. x = ±acos(k) − φ + 2πn, and
//          along each of the two families of points the values are monotone in n, so the first
//          and the last point of each family inside [l, u] suffice (6 candidates, any width).
//          So every slope gives a sound line, and the slope is only a matter of tightness:
//   - f monotone on [l, u] (no extremum inside: one half-wave [−π/2, π/2] + hπ of sin(x + φ),
//     auto_LiRPA's sigmoid_like_mask): there f = ±sin(z), z = x + φ − hπ ∈ [−π/2, π/2], S-shaped
//     with its inflection at z = 0, and we take auto_LiRPA's lines (those of BoundTanh):
//       z ≤ 0 (convex)   lower = tangent at the midpoint,  upper = chord
//       z ≥ 0 (concave)  lower = chord,                    upper = tangent at the midpoint
//       straddling 0     lower = chord if its slope is below f'(z_l), else the tangent at
//                        d ∈ [−π/2, 0] whose line passes through (z_u, sin z_u); upper by symmetry
//     auto_LiRPA reads d from a table on a 0.01 grid (the next grid point); we bisect per neuron
//     (50 steps), so our tangent touches at (z_u, sin z_u) where auto_LiRPA's passes within the
//     grid step below it. The tightest intercept of each of these slopes is the line itself.
//   - an extremum inside and u − l < 2π: the chord's slope for both lines, each moved to the
//     tightest intercept (a chord that stays on one side of f is kept as it is). auto_LiRPA
//     chooses here between the chord and tangents read from its tables around the midpoint
//     (bound_relax_branch); ours is a different sound choice, not its lines.
//   - u − l ≥ 2π (at least a whole period): slope 0, the constant bounds [−1, 1].
//   - u − l < 1e-8 (a point, below the chord's clamp): f' at the midpoint for both lines.
// α-CROWN optimises the two slopes per neuron as angles ψ with slope sin ψ (P = [2, batch,
// *shape]: lower line, upper line), initialised at asin of CROWN's slopes and projected onto the
// slopes f' takes on [l, u] (every slope is sound, the intercept follows it; these are the slopes
// of tangents at points of [l, u], where auto_LiRPA keeps its tangent points, and they hold
// CROWN's: the chord's by the mean value theorem), except that a chord that is the best line of
// its side stays fixed, as in auto_LiRPA (line_slope_ranges). ψ is π/2 minus a tangent point of
// sin, up to its period and symmetry: it stays in [−π/2, π/2], where a tangent point far from 0
// would lose float32 precision, and the slope 0 (wide intervals) is ψ = 0 exactly. auto_LiRPA
// optimises 12 tangent points per neuron instead.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <array>
#include <numbers>
#include <utility>

#include "distcrown/graph/bound_node.hpp"
#include "distcrown/graph/op_registry.hpp"
#include "elementwise_lines.hpp"

namespace distcrown::ops {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kTwoPi = 2 * std::numbers::pi;
constexpr int kBisections = 50;

enum class Trig { kSin, kCos };

// Index of each line's angle in P = [2, batch, *shape].
enum TrigLine : int64_t { kLowerLine = 0, kUpperLine = 1 };

// Whether [l, u] holds a point p + 2πn (any n), elementwise: auto_LiRPA's check_crossing.
at::Tensor holds_point(const at::Tensor& l, const at::Tensor& u, double p) {
  return (at::floor((u - p) / kTwoPi) - at::floor((l - p) / kTwoPi)) > 0;
}

// The tangent point d ∈ [−π/2, 0] of sin whose tangent passes through (b, sin b), for
// b ∈ [0, π/2] ([batch, *shape]): the tangent at any point in [−π/2, d] lies below sin on
// (−∞, b]. Bisection keeping the valid end (at −π/2 the tangent is the constant −1).
at::Tensor tangent_point_through(const at::Tensor& b) {
  at::Tensor lo = at::full_like(b, -kPi / 2);
  at::Tensor hi = at::zeros_like(b);
  const at::Tensor sb = at::sin(b);
  for (int i = 0; i < kBisections; ++i) {
    const at::Tensor m = (lo + hi) / 2;
    const at::Tensor below = at::sin(m) + at::cos(m) * (b - m) <= sb;
    lo = at::where(below, m, lo);
    hi = at::where(below, hi, m);
  }
  return lo;
}

class BoundTrig final : public BoundNode {
 public:
  explicit BoundTrig(Trig f) : f_(f), phase_(f == Trig::kSin ? 0.0 : kPi / 2) {}
  std::string op_type() const override { return f_ == Trig::kSin ? "Sin" : "Cos"; }
  OpTraits traits() const override {
    return {.elementwise = true, .needs_input_bounds = true, .relaxation_params = true};
  }

  [[nodiscard]] at::Tensor apply(const at::Tensor& x) const {
    return f_ == Trig::kSin ? at::sin(x) : at::cos(x);
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return apply(x[0]); }

  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor& l = x[0]->lower;
    const at::Tensor& u = x[0]->upper;
    const at::Tensor fl = apply(l);
    const at::Tensor fu = apply(u);
    const at::Tensor one = at::ones_like(fl);
    return {at::where(holds_point(l, u, 1.5 * kPi - phase_), -one, at::minimum(fl, fu)),
            at::where(holds_point(l, u, 0.5 * kPi - phase_), one, at::maximum(fl, fu))};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return at::asin(crown_slopes(in).clamp(-1.0, 1.0));  // [2, B, *shape]
  }

  void project_relaxation_params(at::Tensor& alpha, const Interval& in) const override {
    // alpha [2, rows, 2, B, *shape]; the ranges [2, B, *shape] (lower line, upper line) broadcast.
    const Interval k = line_slope_ranges(in);
    alpha.copy_(at::minimum(at::maximum(alpha, at::asin(k.lower)), at::asin(k.upper)));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    const Interval& pre = *bounds[0];
    return {relax_elementwise(a, bias, p.alpha_l, p.alpha_u,
                              [&](const at::Tensor& angles) { return lines(pre, angles); })};
  }

 private:
  // The slopes f' takes on [l, u] ([B, *shape] each): f' = sin(x + φ + π/2), bounded as ibp().
  [[nodiscard]] Interval slope_range(const Interval& in) const {
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const at::Tensor dl = f_ == Trig::kSin ? at::cos(l) : -at::sin(l);
    const at::Tensor du = f_ == Trig::kSin ? at::cos(u) : -at::sin(u);
    const at::Tensor one = at::ones_like(dl);
    return {at::where(holds_point(l, u, kPi - phase_), -one, at::minimum(dl, du)).clamp(-1.0, 1.0),
            at::where(holds_point(l, u, -phase_), one, at::maximum(dl, du)).clamp(-1.0, 1.0)};
  }

  // The slopes α may take per line ([2, B, *shape]: lower line, upper line): slope_range(), except
  // that the chord is pinned where it is the best line of its side. On [l, u] inside one convex
  // region of f (x + φ ∈ [π, 2π] + 2πn) every sound upper line lies above the chord on all of
  // [l, u], so no other upper slope can give a tighter bound, for any A; likewise the lower line
  // on a concave region ([0, π] + 2πn). CROWN takes the chord there already; letting α move it only
  // lets Adam's first steps (lr 0.5, of the order of the whole range) throw it off the optimum.
  // auto_LiRPA keeps these chords fixed too (it optimises tangent points only).
  [[nodiscard]] Interval line_slope_ranges(const Interval& in) const {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const Interval any = slope_range(in);
    const at::Tensor region = at::floor((l + phase_) / kPi);  // even: concave, odd: convex
    const at::Tensor one_region = (region == at::floor((u + phase_) / kPi)) & ((u - l) >= 1e-8);
    const at::Tensor even = at::remainder(region, 2) == 0;
    // CROWN's slope is that chord wherever a line is pinned (a monotone convex or concave piece, or
    // an extremum inside and u − l < π); taking it from crown_slopes() keeps the pinned α exactly
    // at CROWN's line.
    const at::Tensor crown = crown_slopes(in).clamp(-1.0, 1.0);
    const at::Tensor pin_lower = one_region & even;   // concave: the chord is the best lower line
    const at::Tensor pin_upper = one_region & ~even;  // convex: the chord is the best upper line
    const at::Tensor lower_line = crown[kLowerLine];
    const at::Tensor upper_line = crown[kUpperLine];
    return {at::stack({at::where(pin_lower, lower_line, any.lower),
                       at::where(pin_upper, upper_line, any.lower)}),
            at::stack({at::where(pin_lower, lower_line, any.upper),
                       at::where(pin_upper, upper_line, any.upper)})};
  }

  // CROWN's slopes (header comment): [2, B, *shape]. The choice carries no gradient (any slope is
  // sound; the intercepts keep theirs).
  [[nodiscard]] at::Tensor crown_slopes(const Interval& in) const {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    // Half-wave h of sin(x + φ): [−π/2, π/2] + hπ, where sin(x + φ) = σ·sin(z), z = x + φ − hπ,
    // σ = (−1)^h.
    const at::Tensor h = at::floor((l + phase_ + kPi / 2) / kPi);
    const at::Tensor monotone = h == at::floor((u + phase_ + kPi / 2) / kPi);
    const at::Tensor za = l + phase_ - h * kPi;
    const at::Tensor zb = u + phase_ - h * kPi;
    const at::Tensor zk = chord(za, zb, at::sin(za), at::sin(zb)).first;
    const at::Tensor tangent_mid = at::cos((za + zb) / 2);
    const at::Tensor through_u = at::cos(tangent_point_through(zb.clamp(0, kPi / 2)));
    const at::Tensor through_l = at::cos(tangent_point_through((-za).clamp(0, kPi / 2)));
    // The lines of sin(z) on [za, zb] (header comment); z = 0 = za = zb takes the tangent.
    const at::Tensor lower_z =
        at::where(zb <= 0, tangent_mid, at::where((za >= 0) | (zk < at::cos(za)), zk, through_u));
    const at::Tensor upper_z =
        at::where(za >= 0, tangent_mid, at::where((zb <= 0) | (zk < at::cos(zb)), zk, through_l));
    const at::Tensor rising = at::remainder(h, 2) == 0;  // σ = 1; else f = −sin(z) swaps the lines
    const at::Tensor lower_k = at::where(rising, lower_z, -upper_z);
    const at::Tensor upper_k = at::where(rising, upper_z, -lower_z);
    // An extremum inside: the chord's slope; a whole period or more: slope 0.
    const at::Tensor k = chord(l, u, apply(l), apply(u)).first;
    const at::Tensor wide = (u - l) >= kTwoPi;
    const at::Tensor other = at::where(wide, at::zeros_like(k), k);
    // Below the chord's 1e-8 clamp of u − l its slope is meaningless (0 at a point): there both
    // lines take f' at the midpoint, exact at a point and inside slope_range.
    const at::Tensor point = (u - l) < 1e-8;
    const at::Tensor mid = (l + u) / 2;
    const at::Tensor at_mid = f_ == Trig::kSin ? at::cos(mid) : -at::sin(mid);
    return at::stack({at::where(point, at_mid, at::where(monotone, lower_k, other)),
                      at::where(point, at_mid, at::where(monotone, upper_k, other))});
  }

  // The tightest intercepts of lines of slope k ([B, *shape] or [rows, B, *shape]) below and above
  // f on [l, u]: min and max of f(x) − k·x over l, u and the first and last critical point of each
  // family ±acos(k) − φ + 2πn inside [l, u] (clamped into it: an empty family gives l or u).
  [[nodiscard]] std::pair<at::Tensor, at::Tensor> tightest_intercepts(const at::Tensor& l,
                                                                      const at::Tensor& u,
                                                                      const at::Tensor& k) const {
    const auto gap = [&](const at::Tensor& x) { return apply(x) - k * x; };
    const auto inside = [&](const at::Tensor& x) { return at::minimum(at::maximum(x, l), u); };
    std::array<at::Tensor, 6> values{gap(l), gap(u)};
    size_t next = 2;
    {
      // The critical points depend on k only through where they lie: the envelope theorem gives
      // the intercept's gradient −x there, so they carry none (acos' is infinite at ±1).
      const at::Tensor theta = at::acos(k.detach().clamp(-1.0, 1.0));
      for (const at::Tensor& offset : {theta - phase_, -theta - phase_}) {
        const at::Tensor first = offset + kTwoPi * at::ceil((l - offset) / kTwoPi);
        const at::Tensor last = offset + kTwoPi * at::floor((u - offset) / kTwoPi);
        values.at(next++) = gap(inside(first));
        values.at(next++) = gap(inside(last));
      }
    }
    at::Tensor lo = values[0];
    at::Tensor hi = values[0];
    for (size_t i = 1; i < values.size(); ++i) {
      lo = at::minimum(lo, values.at(i));
      hi = at::maximum(hi, values.at(i));
    }
    return {lo, hi};
  }

  // The lines for bounds `pre` with the slopes of angles `angles` ([rows, 2, B, *shape],
  // projected) or CROWN's slopes when undefined.
  [[nodiscard]] ElementwiseLines lines(const Interval& pre, const at::Tensor& angles) const {
    const at::Tensor k = angles.defined() ? at::sin(angles) : crown_slopes(pre);
    const int64_t dim = angles.defined() ? 1 : 0;
    ElementwiseLines out;
    out.lower_k = k.select(dim, kLowerLine);
    out.upper_k = k.select(dim, kUpperLine);
    out.lower_b = tightest_intercepts(pre.lower, pre.upper, out.lower_k).first;
    out.upper_b = tightest_intercepts(pre.lower, pre.upper, out.upper_k).second;
    return out;
  }

  Trig f_;
  double phase_;  // φ: f(x) = sin(x + φ)
};

template <Trig F>
Value lower_trig(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(BoundTrig(F).apply(ctx.constant(0)));
  return ctx.emit(std::make_unique<BoundTrig>(F), {ctx.bounded(0)});
}

}  // namespace

void register_trig(OpRegistry& r) {
  r.add("Sin", {.first = 7}, lower_trig<Trig::kSin>);
  r.add("Cos", {.first = 7}, lower_trig<Trig::kCos>);
}

}  // namespace distcrown::ops
