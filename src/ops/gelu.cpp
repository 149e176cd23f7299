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
//   α      BoundGelu's tangent points: 7 per neuron (P = [7, batch, *shape], TangentEntry; its
//          14 are 7 per side), each initialised at CROWN's point of its case (the midpoint, or the
//          tangent point through an end, for d_lower_right / d_lower_left at BoundGelu's 0.01 grid
//          point beyond the end, as its tables) and projected at every use onto its own range
//          (tangent_plan); the neuron's case picks one per line. Where CROWN takes the chord (and
//          BoundGelu keeps it fixed in α) the line stays the chord. A line has slope f'(t) and,
//          as value, its tightest intercept (sound whatever t, never looser than the tangent), as
//          gradient the tangent's, which BoundGelu follows: the two agree wherever the tangent
//          touches f in [l, u] alone. So α follows auto_LiRPA's optimisation (test_op_refs).
#include "ops/gelu.hpp"

#include <ATen/ATen.h>

#include <c10/core/GradMode.h>

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "distcrown/graph/bound_node.hpp"
#include "elementwise_lines.hpp"
#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/bilinear.hpp"
#include "ops/mul_div.hpp"
#include "ops/power.hpp"
#include "ops/s_shaped.hpp"
#include "tangent_entries.hpp"

namespace distcrown::ops {
namespace {

constexpr double kCubic = 0.044715;
constexpr double kRoot2 = std::numbers::sqrt2;
// Where GELU has its minimum: f'(x*) = 0.
constexpr double kArgMin = -0.7517915246935645;
constexpr int kBisections = 50;

// Index of each line in CROWN's slopes [2, batch, *shape].
enum GeluLine : int64_t { kLowerLine = 0, kUpperLine = 1 };

// α's tangent points per neuron, P = [kEntries, batch, *shape], as BoundGelu's 14 (7 per side):
// the midpoint tangents (upper on a concave piece, lower on a convex one), the tangents through
// an end from the convex part (lower, right or left of the minimum's side) or from a concave part
// (upper), and the lower one where [l, u] holds both ±√2.
enum TangentEntry : int64_t {
  kMidUpper = 0,    // tp_pos: in [l, u]
  kMidLower = 1,    // tp_neg: in [l, u]
  kRightLower = 2,  // tp_right_lower: in [l, d_lower_right]
  kRightUpper = 3,  // tp_right_upper: at least d_upper_right
  kLeftLower = 4,   // tp_left_lower: in [d_lower_left, u]
  kLeftUpper = 5,   // tp_left_upper: at most d_upper_left
  kBothLower = 6,   // tp_both_lower: in [d_lower_left, d_lower_right]
  kEntries = 7,
};

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

// The tangent point of a tangent from the convex part [lo, hi] ⊂ [−√2, √2] of f through (p, f(p)),
// p ≥ hi
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
  return bisect(lo, hi, right, towards_right);
}

// The tangent point of a tangent from a concave part [lo, hi] (outside (−√2, √2)) of f through (p,
// f(p)), p ≤ lo (`right`: the part lies right of p) or p ≥ hi: the tangent point nearest to p whose
// tangent passes above f(p) (BoundGelu's d_upper_right / d_upper_left).
at::Tensor concave_tangent_through(const at::Tensor& p, const at::Tensor& lo, const at::Tensor& hi,
                                   bool right) {
  const at::Tensor fp = gelu_of(p);
  const auto towards_right = [&](const at::Tensor& d) {
    const at::Tensor over = gelu_of(d) + gelu_slope(d) * (p - d) >= fp;
    return right ? ~over : over;
  };
  return bisect(lo, hi, !right, towards_right);
}

// GELU (approximate = "none") as one function (header comment).
class BoundGeluFn final : public TangentEntriesNode<BoundGeluFn> {
 public:
  std::string op_type() const override { return "Gelu"; }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splits_anywhere = true};
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

 private:
  friend class TangentEntriesNode<BoundGeluFn>;

  // α's plan, BoundGelu's in its α stage. BoundGelu keeps 7 tangent points per neuron and side
  // (TangentEntry): each with its own initial value (CROWN's tangent point of its case), each
  // projected onto its own range at every use, whatever case the neuron is in now; the case picks
  // one entry per line. As intermediate bounds tighten during the optimisation a neuron may change
  // case and so continue from another entry, as in auto_LiRPA. Where CROWN takes the chord (and
  // BoundGelu keeps it fixed in α) the line is CROWN's (`fixed`, slope `fixed_k`), as at points
  // below the chord's clamp. Unbounded ranges are BoundGelu's too (a tangent on a concave part
  // beyond the interval stays above f there).
  struct TangentPlan {
    at::Tensor init, lo, hi;              // [kEntries, B, *shape]
    at::Tensor lower_entry, upper_entry;  // [B, *shape], int64: the entry each line takes
    at::Tensor fixed, fixed_k;            // [2, B, *shape]: lower line, upper line
  };

  [[nodiscard]] static TangentPlan tangent_plan(const Interval& in) {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const CrownLines c = crown_lines(in);
    const at::Tensor k = c.chord_k;
    const at::Tensor dl = gelu_slope(l);
    const at::Tensor du = gelu_slope(u);
    const at::Tensor mid = (l + u) / 2;
    const at::Tensor inf = at::full_like(l, std::numeric_limits<double>::infinity());
    const Masks m = masks(l, u);

    TangentPlan plan;
    // Per entry (TangentEntry order): initial value, range. BoundGelu clamps at l last for
    // kRightLower and at u last for kLeftLower (where the tangent point falls outside [l, u]).
    // BoundGelu reads d_lower_right and d_lower_left from tables on a 0.01 grid: the tangent
    // through the grid point next beyond the end (p ≥ u, resp. p ≤ l). α starts and is projected
    // there as in auto_LiRPA (its range is a little narrower than the exact tangent's; the lines
    // stay sound: a tangent below f at p is below f up to p).
    const double step = 0.01;
    const at::Tensor beyond_u = kRoot2 + step * (at::trunc((u - kRoot2) / step).clamp_min(0) + 1);
    const at::Tensor beyond_l = -kRoot2 - step * (at::trunc((-l - kRoot2) / step).clamp_min(0) + 1);
    const at::Tensor cap_u = at::minimum(u, at::ones_like(l));
    const at::Tensor from_l = at::minimum(at::maximum(l, at::full_like(l, -kRoot2)), cap_u);
    const at::Tensor d_lower_right =
        at::where(u > kRoot2, tangent_through(beyond_u, from_l, cap_u, true), c.through_u);
    const at::Tensor cap_l = at::minimum(u, at::full_like(l, kArgMin));
    const at::Tensor from_l2 = at::minimum(at::maximum(l, at::full_like(l, -kRoot2)), cap_l);
    const at::Tensor d_lower_left =
        at::where(l < -kRoot2, tangent_through(beyond_l, from_l2, cap_l, false), c.through_l);
    // d_upper_right / d_upper_left stay exact: BoundGelu indexes its d_upper_left table by l
    // where the tangent must pass above f(u) (no reference case reaches them).
    plan.init = at::stack({mid, mid, d_lower_right, c.right_through_l, d_lower_left,
                           c.left_through_u, d_lower_right});
    plan.lo = at::stack({l, l, l, c.right_through_l, at::minimum(d_lower_left, u), -inf,
                         at::minimum(d_lower_left, d_lower_right)});
    plan.hi =
        at::stack({u, u, at::maximum(d_lower_right, l), inf, u, c.left_through_u, d_lower_right});

    const auto entry = [&](TangentEntry e) { return at::full_like(l, int64_t{e}, at::kLong); };
    at::Tensor lower = entry(kMidLower);  // left_pos, right_neg, two
    lower = at::where(m.right | m.right_3, entry(kRightLower), lower);
    lower = at::where(m.left | m.left_3, entry(kLeftLower), lower);
    lower = at::where(m.four, entry(kBothLower), lower);
    at::Tensor upper = entry(kMidUpper);  // right_pos, left_neg
    upper = at::where(m.right, entry(kRightUpper), upper);
    upper = at::where(m.left, entry(kLeftUpper), upper);
    plan.lower_entry = lower;
    plan.upper_entry = upper;

    const at::Tensor point = (u - l) < 1e-8;
    const at::Tensor lower_fixed =
        m.left_neg | m.right_pos | (m.right & (k < dl)) | (m.left & (k > du)) | point;
    const at::Tensor upper_fixed = m.left_pos | m.right_neg | m.two | m.left_3 | m.right_3 |
                                   m.four | (m.right & (k < du)) | (m.left & (k > dl)) | point;
    plan.fixed = at::stack({lower_fixed, upper_fixed});
    plan.fixed_k = c.slopes;
    return plan;
  }

  // BoundGelu's masks (its _init_masks), [B, *shape] each.
  struct Masks {
    at::Tensor left_pos, left_neg, left, right_pos, right_neg, right, two, left_3, right_3, four;
  };
  [[nodiscard]] static Masks masks(const at::Tensor& l, const at::Tensor& u) {
    Masks m;
    m.left_pos = (l >= -kRoot2) & (u <= 0);
    m.left_neg = u <= -kRoot2;
    m.left = (u <= 0) & ~(m.left_pos | m.left_neg);  // l < −√2 < u ≤ 0
    m.right_pos = l >= kRoot2;
    m.right_neg = (u <= kRoot2) & (l >= 0);
    m.right = (l >= 0) & ~(m.right_pos | m.right_neg);  // 0 ≤ l < √2 < u
    m.two = (u > 0) & (u <= kRoot2) & (l < 0) & (l >= -kRoot2);
    m.left_3 = (l < -kRoot2) & (u > 0) & (u <= kRoot2);
    m.right_3 = (u > kRoot2) & (l < 0) & (l >= -kRoot2);
    m.four = (l < -kRoot2) & (u > kRoot2);
    return m;
  }

  // CROWN's slopes, BoundGelu's masks (header comment), with the tangent points they come from.
  // No gradient (any slope is sound; the intercepts keep theirs).
  struct CrownLines {
    at::Tensor slopes;   // [2, B, *shape]: lower line, upper line
    at::Tensor chord_k;  // [B, *shape] each below: the chord's slope and the tangent points
    at::Tensor through_u, through_l, right_through_l, left_through_u;
  };
  [[nodiscard]] static CrownLines crown_lines(const Interval& in) {
    const c10::NoGradGuard no_grad;
    const at::Tensor& l = in.lower;
    const at::Tensor& u = in.upper;
    const at::Tensor k = chord(l, u, gelu_of(l), gelu_of(u)).first;
    const at::Tensor mid = gelu_slope((l + u) / 2);
    const at::Tensor dl = gelu_slope(l);
    const at::Tensor du = gelu_slope(u);
    const at::Tensor lo = at::full_like(l, -kRoot2);
    const at::Tensor hi = at::full_like(l, kRoot2);
    CrownLines c;
    c.chord_k = k;
    // Tangents from the convex part through (u, f(u)) and through (l, f(l)), with their tangent
    // points in BoundGelu's search ranges: at most 1 for the first (d_lower_right) and at most x*
    // (slope ≤ 0) for the second (d_lower_left). From the concave parts through the other end.
    const at::Tensor cap_u = at::minimum(u, at::ones_like(l));
    c.through_u = tangent_through(u, at::minimum(at::maximum(l, lo), cap_u), cap_u, true);
    const at::Tensor cap_l = at::minimum(u, at::full_like(l, kArgMin));
    c.through_l = tangent_through(l, at::minimum(at::maximum(l, lo), cap_l), cap_l, false);
    c.right_through_l = concave_tangent_through(l, at::maximum(l, hi), at::maximum(u, hi), true);
    c.left_through_u = concave_tangent_through(u, at::minimum(l, lo), at::minimum(u, lo), false);
    const at::Tensor through_u = gelu_slope(c.through_u);
    const at::Tensor through_l = gelu_slope(c.through_l);
    const at::Tensor right_through_l = gelu_slope(c.right_through_l);
    const at::Tensor left_through_u = gelu_slope(c.left_through_u);

    const Masks m = masks(l, u);
    // Lower line.
    at::Tensor lower = k;  // left_neg, right_pos: the chord
    lower = at::where(m.left_pos | m.right_neg | m.two, mid, lower);
    lower = at::where(m.right, at::where(k < dl, k, through_u), lower);
    lower = at::where(m.right_3 | m.four, through_u, lower);
    lower = at::where(m.left, at::where(k > du, k, through_l), lower);
    lower = at::where(m.left_3, through_l, lower);
    // Upper line.
    at::Tensor upper = k;  // left_pos, right_neg, l < 0 < u: the chord
    upper = at::where(m.right_pos | m.left_neg, mid, upper);
    upper = at::where(m.right, at::where(k < du, k, right_through_l), upper);
    upper = at::where(m.left, at::where(k > dl, k, left_through_u), upper);
    // Below the chord's 1e-8 clamp of u − l: f' at the midpoint for both lines.
    const at::Tensor point = (u - l) < 1e-8;
    c.slopes = at::stack({at::where(point, mid, lower), at::where(point, mid, upper)});
    return c;
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

  // The lines for bounds `pre` with tangent points `t` ([rows, kEntries, B, *shape], projected;
  // `plan` is tangent_plan(pre)) or CROWN's slopes when undefined.
  [[nodiscard]] static ElementwiseLines lines(const Interval& pre, const at::Tensor& t,
                                              const TangentPlan& plan) {
    ElementwiseLines out;
    if (!t.defined()) {
      const at::Tensor k = crown_lines(pre).slopes;
      out.lower_k = k[kLowerLine];
      out.upper_k = k[kUpperLine];
      out.lower_b = tightest_intercepts(pre.lower, pre.upper, out.lower_k).first;
      out.upper_b = tightest_intercepts(pre.lower, pre.upper, out.upper_k).second;
      return out;
    }
    // One line: the tangent at the entry's point, or the fixed line. Its intercept's value is the
    // tightest for its slope (exactly: b + 0), its gradient the tangent's, as BoundGelu
    // differentiates its line: the two agree wherever the tangent touches f in [l, u] alone;
    // where it also touches at an end (the tangent through an end, where α starts) the min's
    // gradient would split between the two points, the tangent's is the one auto_LiRPA follows.
    const auto line = [&](const at::Tensor& entry, int64_t which, bool lower) {
      // entry [B, *shape] -> [rows, 1, B, *shape], picking along t's entry dimension.
      std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
      shape[1] = 1;
      const at::Tensor tp = t.gather(1, entry.unsqueeze(0).unsqueeze(0).expand(shape)).squeeze(1);
      const at::Tensor fixed = plan.fixed[which];
      const at::Tensor k = at::where(fixed, plan.fixed_k[which], gelu_slope(tp));
      const auto tight = tightest_intercepts(pre.lower, pre.upper, k);
      const at::Tensor b = lower ? tight.first : tight.second;
      const at::Tensor tangent_b = gelu_of(tp) - k * tp;
      return std::pair{k, at::where(fixed, b, b.detach() + (tangent_b - tangent_b.detach()))};
    };
    std::tie(out.lower_k, out.lower_b) = line(plan.lower_entry, kLowerLine, true);
    std::tie(out.upper_k, out.upper_b) = line(plan.upper_entry, kUpperLine, false);
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

NodePtr make_gelu() { return std::make_unique<BoundGeluFn>(); }

void register_gelu(OpRegistry& r) { r.add("Gelu", {.first = 20}, lower_gelu); }

}  // namespace distcrown::ops
