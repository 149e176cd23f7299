// Gelu (opset 20) of a bounded tensor.
//   approximate = "none"  y = x · Φ(x) = x · 0.5·(1 + erf(x/√2)), bounded as one function
//                         (BoundGeluFn below), as auto_LiRPA's BoundGelu (operators/gelu.py)
//   approximate = "tanh"  y = x · 0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))), lowered into the
//                         nodes its definition names, each bounded alone (Tanh: ops/s_shaped, x³:
//                         ops/power, the product of two bounded tensors: McCormick, ops/bilinear);
//                         sound, looser than one relaxation of the whole function.
// The decomposed form torch.onnx exports before opset 20 (Div, Erf, Add, Mul, Mul) is fused into
// one Gelu node at load (io/onnx_gelu_fusion.hpp) where it matches exactly, and so bounded as one
// function too; a near miss keeps its nodes, bounded one by one like the tanh form.
//
// GELU (f = x·Φ(x)) is convex on [−√2, √2] and concave outside; it falls to its minimum
// f(x*) ≈ −0.16997 at x* ≈ −0.75179 and rises after. Per neuron with input bounds [l, u]:
//   IBP    exact: [min(f(l), f(u)), max(f(l), f(u))], the minimum f(x*) where x* ∈ [l, u]
//          (auto_LiRPA always takes f(x*) as the lower bound, so ours is never looser)
//   CROWN  auto_LiRPA's choice of slopes (its masks): on a convex piece the tangent at the
//          midpoint below and the chord above, on a concave piece the reverse; where [l, u]
//          straddles ±√2, tangents from the convex part through the far end ((u, f(u)) or
//          (l, f(l))) or the chord, as BoundGelu does. auto_LiRPA reads those tangent points from
//          tables on a 0.01 grid; we bisect. Each slope then takes its tightest intercept on
//          [l, u] (the min / max of f(x) − k·x, over l, u and the points where f'(x) = k on the
//          three monotone pieces of f': (−∞, −√2], [−√2, √2], [√2, ∞)), so every line is sound
//          whatever its slope, and equals BoundGelu's where that line is already tight.
//   α      the two slopes per neuron (P = [2, batch, *shape]: lower line, upper line),
//          initialised at CROWN's and projected onto the slopes f' takes on [l, u]; a chord that
//          is the best line of its side (the upper line on a convex piece, the lower on a concave
//          one) stays fixed. auto_LiRPA optimises 14 tangent points per neuron instead.
#include <ATen/ATen.h>

#include <c10/core/GradMode.h>

#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "distcrown/graph/bound_node.hpp"
#include "distcrown/graph/op_registry.hpp"
#include "distcrown/ops/add_sub.hpp"
#include "distcrown/ops/bilinear.hpp"
#include "distcrown/ops/mul_div.hpp"
#include "distcrown/ops/power.hpp"
#include "distcrown/ops/s_shaped.hpp"
#include "elementwise_lines.hpp"

namespace distcrown::ops {
namespace {

constexpr double kCubic = 0.044715;
constexpr double kRoot2 = std::numbers::sqrt2;
// Where GELU has its minimum: f'(x*) = 0.
constexpr double kArgMin = -0.7517915246935645;
constexpr int kBisections = 50;

// Index of each line's slope in P = [2, batch, *shape].
enum GeluLine : int64_t { kLowerLine = 0, kUpperLine = 1 };

at::Tensor gelu_of(const at::Tensor& x) { return at::gelu(x); }
// f'(x) = Φ(x) + x·φ(x).
at::Tensor gelu_slope(const at::Tensor& x) {
  return 0.5 * (1 + at::erf(x / kRoot2)) +
         x * at::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
}

// Bisection on [a, b] (per neuron) for where `go_right(m)` switches from true to false: the last
// point where it holds (`keep_left`) or the first where it does not, to 2⁻⁵⁰ of b − a.
template <class Pred>
at::Tensor bisect(at::Tensor a, at::Tensor b, bool keep_left, Pred&& go_right) {
  for (int i = 0; i < kBisections; ++i) {
    const at::Tensor m = (a + b) / 2;
    const at::Tensor right = go_right(m);
    a = at::where(right, m, a);
    b = at::where(right, b, m);
  }
  return keep_left ? a : b;
}

// The slope of a tangent from the convex part [lo, hi] ⊂ [−√2, √2] of f through (p, f(p)), p ≥ hi
// (`right`) or p ≤ lo: the tangent point d nearest to p whose tangent still passes below f(p)
// (BoundGelu's d_lower_right / d_lower_left); where none in [lo, hi] does, an end of it. The
// tightest intercept makes any of these lines sound.
at::Tensor tangent_through(const at::Tensor& p, const at::Tensor& lo, const at::Tensor& hi,
                           bool right) {
  const at::Tensor fp = gelu_of(p);
  const auto towards_right = [&](const at::Tensor& d) {
    const at::Tensor under = gelu_of(d) + gelu_slope(d) * (p - d) <= fp;
    return right ? under : ~under;
  };
  return gelu_slope(bisect(lo, hi, right, towards_right));
}

// The slope of a tangent from a concave part [lo, hi] (outside (−√2, √2)) of f through (p, f(p)),
// p ≤ lo (`right`: the part lies right of p) or p ≥ hi: the tangent point nearest to p whose
// tangent passes above f(p) (BoundGelu's d_upper_right / d_upper_left).
at::Tensor concave_tangent_through(const at::Tensor& p, const at::Tensor& lo, const at::Tensor& hi,
                                   bool right) {
  const at::Tensor fp = gelu_of(p);
  const auto towards_right = [&](const at::Tensor& d) {
    const at::Tensor over = gelu_of(d) + gelu_slope(d) * (p - d) >= fp;
    return right ? ~over : over;
  };
  return gelu_slope(bisect(lo, hi, !right, towards_right));
}

// GELU (approximate = "none") as one function (header comment).
class BoundGeluFn final : public BoundNode {
 public:
  std::string op_type() const override { return "Gelu"; }
  OpTraits traits() const override {
    return {.elementwise = true, .needs_input_bounds = true, .relaxation_params = true};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return gelu_of(x[0]); }

  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor& l = x[0]->lower;
    const at::Tensor& u = x[0]->upper;
    const at::Tensor fl = gelu_of(l);
    const at::Tensor fu = gelu_of(u);
    const at::Tensor lowest = gelu_of(at::full_like(l, kArgMin));
    const at::Tensor holds_min = (l <= kArgMin) & (u >= kArgMin);
    return {at::where(holds_min, at::minimum(lowest, at::minimum(fl, fu)), at::minimum(fl, fu)),
            at::maximum(fl, fu)};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return crown_slopes(in);  // [2, B, *shape]
  }

  void project_relaxation_params(at::Tensor& alpha, const Interval& in) const override {
    // alpha [2, rows, 2, B, *shape]; the ranges [2, B, *shape] (lower line, upper line) broadcast.
    const Interval k = line_slope_ranges(in);
    alpha.copy_(at::minimum(at::maximum(alpha, k.lower), k.upper));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    const Interval& pre = *bounds[0];
    return {relax_elementwise(a, bias, p.alpha_l, p.alpha_u,
                              [&](const at::Tensor& k) { return lines(pre, k); })};
  }

 private:
  // The slopes f' takes on [l, u] ([B, *shape] each): f' falls on (−∞, −√2], rises on [−√2, √2]
  // and falls on [√2, ∞), so its extremes lie at l, u, −√2 (minimum) or √2 (maximum).
  [[nodiscard]] static Interval slope_range(const Interval& in) {
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const at::Tensor dl = gelu_slope(l);
    const at::Tensor du = gelu_slope(u);
    const at::Tensor lowest = gelu_slope(at::full_like(l, -kRoot2));
    const at::Tensor highest = gelu_slope(at::full_like(l, kRoot2));
    return {at::where((l <= -kRoot2) & (u >= -kRoot2), lowest, at::minimum(dl, du)),
            at::where((l <= kRoot2) & (u >= kRoot2), highest, at::maximum(dl, du))};
  }

  // slope_range() per line ([2, B, *shape]), with the chord pinned where it is the best line of
  // its side: on a convex piece every sound upper line lies above the chord on all of [l, u], on a
  // concave piece every sound lower line below it (there CROWN's line is that chord).
  [[nodiscard]] Interval line_slope_ranges(const Interval& in) const {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const Interval any = slope_range(in);
    const at::Tensor crown = crown_slopes(in);
    const at::Tensor sized = (u - l) >= 1e-8;
    const at::Tensor convex = sized & (l >= -kRoot2) & (u <= kRoot2);
    const at::Tensor concave = sized & ((l >= kRoot2) | (u <= -kRoot2));
    const at::Tensor lower_line = crown[kLowerLine];
    const at::Tensor upper_line = crown[kUpperLine];
    return {at::stack({at::where(concave, lower_line, any.lower),
                       at::where(convex, upper_line, any.lower)}),
            at::stack({at::where(concave, lower_line, any.upper),
                       at::where(convex, upper_line, any.upper)})};
  }

  // CROWN's slopes, BoundGelu's masks (header comment): [2, B, *shape]. No gradient (any slope is
  // sound; the intercepts keep theirs).
  [[nodiscard]] static at::Tensor crown_slopes(const Interval& in) {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const at::Tensor k = chord(l, u, gelu_of(l), gelu_of(u)).first;
    const at::Tensor mid = gelu_slope((l + u) / 2);
    const at::Tensor dl = gelu_slope(l);
    const at::Tensor du = gelu_slope(u);
    const at::Tensor lo = at::full_like(l, -kRoot2);
    const at::Tensor hi = at::full_like(l, kRoot2);
    // Tangents from the convex part through (u, f(u)) and through (l, f(l)), with their tangent
    // points in BoundGelu's search ranges: at most 1 for the first (d_lower_right) and at most x*
    // (slope ≤ 0) for the second (d_lower_left). From the concave parts through the other end.
    const at::Tensor cap_u = at::minimum(u, at::ones_like(l));
    const at::Tensor through_u =
        tangent_through(u, at::minimum(at::maximum(l, lo), cap_u), cap_u, true);
    const at::Tensor cap_l = at::minimum(u, at::full_like(l, kArgMin));
    const at::Tensor through_l =
        tangent_through(l, at::minimum(at::maximum(l, lo), cap_l), cap_l, false);
    const at::Tensor right_through_l =
        concave_tangent_through(l, at::maximum(l, hi), at::maximum(u, hi), true);
    const at::Tensor left_through_u =
        concave_tangent_through(u, at::minimum(l, lo), at::minimum(u, lo), false);

    // BoundGelu's masks.
    const at::Tensor left_pos = (l >= -kRoot2) & (u <= 0);
    const at::Tensor left_neg = u <= -kRoot2;
    const at::Tensor left = (u <= 0) & ~(left_pos | left_neg);  // l < −√2 < u ≤ 0
    const at::Tensor right_pos = l >= kRoot2;
    const at::Tensor right_neg = (u <= kRoot2) & (l >= 0);
    const at::Tensor right = (l >= 0) & ~(right_pos | right_neg);  // 0 ≤ l < √2 < u
    const at::Tensor two = (u > 0) & (u <= kRoot2) & (l < 0) & (l >= -kRoot2);
    const at::Tensor left_3 = (l < -kRoot2) & (u > 0) & (u <= kRoot2);
    const at::Tensor right_3 = (u > kRoot2) & (l < 0) & (l >= -kRoot2);
    const at::Tensor four = (l < -kRoot2) & (u > kRoot2);

    // Lower line.
    at::Tensor lower = k;  // left_neg, right_pos: the chord
    lower = at::where(left_pos | right_neg | two, mid, lower);
    lower = at::where(right, at::where(k < dl, k, through_u), lower);
    lower = at::where(right_3 | four, through_u, lower);
    lower = at::where(left, at::where(k > du, k, through_l), lower);
    lower = at::where(left_3, through_l, lower);
    // Upper line.
    at::Tensor upper = k;  // left_pos, right_neg, l < 0 < u: the chord
    upper = at::where(right_pos | left_neg, mid, upper);
    upper = at::where(right, at::where(k < du, k, right_through_l), upper);
    upper = at::where(left, at::where(k > dl, k, left_through_u), upper);
    // Below the chord's 1e-8 clamp of u − l: f' at the midpoint for both lines.
    const at::Tensor point = (u - l) < 1e-8;
    return at::stack({at::where(point, mid, lower), at::where(point, mid, upper)});
  }

  // The tightest intercepts of lines of slope k ([B, *shape] or [rows, B, *shape]) below and
  // above f on [l, u]: min and max of f(x) − k·x over l, u and the points where f'(x) = k on each
  // monotone piece of f' (clamped into [l, u]; bisection, so they carry no gradient: by the
  // envelope theorem the intercept's gradient is −x there).
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> tightest_intercepts(const at::Tensor& l,
                                                                             const at::Tensor& u,
                                                                             const at::Tensor& k) {
    const auto gap = [&](const at::Tensor& x) { return gelu_of(x) - k * x; };
    std::array<at::Tensor, 5> values{gap(l), gap(u)};
    size_t next = 2;
    {
      const c10::NoGradGuard no_grad;
      const at::Tensor kd = k.detach();
      const at::Tensor ld = l.expand_as(kd);
      const at::Tensor ud = u.expand_as(kd);
      const at::Tensor lo = at::full_like(kd, -kRoot2);
      const at::Tensor hi = at::full_like(kd, kRoot2);
      // Pieces (−∞, −√2] (f' falling), [−√2, √2] (rising), [√2, ∞) (falling), within [l, u].
      const std::array<std::pair<at::Tensor, at::Tensor>, 3> pieces{
          std::pair{ld, at::minimum(ud, lo)}, std::pair{at::maximum(ld, lo), at::minimum(ud, hi)},
          std::pair{at::maximum(ld, hi), ud}};
      const std::array<bool, 3> rising{false, true, false};
      for (size_t i = 0; i < pieces.size(); ++i) {
        const at::Tensor a = at::minimum(pieces.at(i).first, ud);
        const at::Tensor b = at::maximum(at::minimum(pieces.at(i).second, ud), a);
        const bool up = rising.at(i);
        const at::Tensor x = bisect(a, b, true, [&](const at::Tensor& m) {
          const at::Tensor s = gelu_slope(m);
          return up ? s < kd : s > kd;
        });
        values.at(next++) = x;
      }
    }
    at::Tensor lo = values[0];
    at::Tensor hi = values[0];
    for (size_t i = 1; i < values.size(); ++i) {
      const at::Tensor v = i >= 2 ? gap(values.at(i)) : values.at(i);
      lo = at::minimum(lo, v);
      hi = at::maximum(hi, v);
    }
    return {lo, hi};
  }

  // The lines for bounds `pre` with slopes `k` ([rows, 2, B, *shape], projected) or CROWN's
  // slopes when undefined.
  [[nodiscard]] static ElementwiseLines lines(const Interval& pre, const at::Tensor& slopes) {
    const at::Tensor k = slopes.defined() ? slopes : crown_slopes(pre);
    const int64_t dim = slopes.defined() ? 1 : 0;
    ElementwiseLines out;
    out.lower_k = k.select(dim, kLowerLine);
    out.upper_k = k.select(dim, kUpperLine);
    out.lower_b = tightest_intercepts(pre.lower, pre.upper, out.lower_k).first;
    out.upper_b = tightest_intercepts(pre.lower, pre.upper, out.upper_k).second;
    return out;
  }
};

Value lower_gelu(LoweringContext& ctx) {
  if (ctx.inputs.size() != 1) ctx.fail("expects 1 input");
  const std::string approximate = ctx.attrs.get_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    ctx.fail("approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  if (ctx.all_constant()) return Value::of_constant(at::gelu(ctx.constant(0), approximate));
  if (approximate == "none") return ctx.emit(std::make_unique<BoundGeluFn>(), {ctx.bounded(0)});
  // tanh(√(2/π)·(x + 0.044715·x³)).
  const auto scalar = [&](double v) { return ctx.param(at::scalar_tensor(v, at::kDouble)); };
  const int x = ctx.bounded(0);
  const int cube = ctx.emit(make_pow(3), {x}, "/cube").node;
  const int c = ctx.emit(make_mul_const(scalar(kCubic)), {cube}, "/cubic_term").node;
  const int sum = ctx.emit(make_add(), {x, c}, "/inner").node;
  const double k = std::sqrt(2 * std::numbers::inv_pi);
  const int a = ctx.emit(make_mul_const(scalar(k)), {sum}, "/scaled").node;
  const int s = ctx.emit(make_tanh(), {a}, "/tanh").node;
  const int one = ctx.emit(make_add_const(scalar(1.0)), {s}, "/plus_one").node;
  const int half = ctx.emit(make_mul_const(scalar(0.5)), {one}, "/half").node;
  return ctx.emit(make_bilinear_mul(), {x, half});
}

}  // namespace

void register_gelu(OpRegistry& r) { r.add("Gelu", {.first = 20}, lower_gelu); }

}  // namespace distcrown::ops
