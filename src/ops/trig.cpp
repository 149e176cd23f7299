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
// α-CROWN optimises tangent points as auto_LiRPA's BoundSin (BoundCos: the same on x + π/2), in
// the coordinate w = x + φ of sin(w): 6 per neuron (P = [6, batch, *shape], TangentEntry), each
// initialised, and projected at every use onto its own range, as BoundSin's 12 (6 per side):
//   - monotone half-wave (BoundSin's sigmoid_like_mask, then BoundTanh's lines): the midpoint
//     tangents (in [l, u]) on a convex / concave piece, where the chord is the other line and
//     stays fixed; across the inflection the tangent through the far end (d, from BoundSin's
//     0.01 grid) bounds the tangent point's range, or the chord where it is a bound (fixed).
//   - otherwise (bound_relax_branch): the chord where it stays on one side of f (fixed, that side),
//     else tangent points around the minimum (lower line) and maximum (upper line) in BoundSin's
//     folded coordinate, between the tangents from its tables (2π/1000 grid, 20 bisections) at l
//     and at u, initialised as BoundSin from the midpoint.
//   - u − l ≥ 2π and u − l < 1e-8 stay at CROWN's lines (the constants [−1, 1], tighter than
//     BoundSin's tangents, and the point's tangent).
//   Each line has slope cos(t) and, as value, its tightest intercept (sound whatever t, never
//   looser than the tangent), as gradient the tangent's, which BoundSin follows: the two agree
//   wherever the tangent touches f in [l, u]. BoundCos initialises the midpoint entries at the
//   midpoint of x, not of x + π/2 (so they start projected onto an end); ours does the same.
#include "ops/trig.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <array>
#include <limits>
#include <numbers>
#include <tuple>
#include <utility>
#include <vector>

#include "distcrown/graph/bound_node.hpp"
#include "elementwise_lines.hpp"
#include "graph/op_registry.hpp"
#include "tangent_entries.hpp"

namespace distcrown::ops {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kTwoPi = 2 * std::numbers::pi;
constexpr int kBisections = 50;

enum class Trig { kSin, kCos };

// Index of each line in CROWN's slopes [2, batch, *shape].
enum TrigLine : int64_t { kLowerLine = 0, kUpperLine = 1 };

// α's tangent points per neuron (w = x + φ), P = [kEntries, batch, *shape], as BoundSin's 12 (6
// per side).
enum TangentEntry : int64_t {
  kMidUpper = 0,     // tp_pos: concave half-wave piece, in [l, u]
  kMidLower = 1,     // tp_neg: convex piece, in [l, u]
  kBothLower = 2,    // tp_both_lower: across the inflection, up to d_lower
  kBothUpper = 3,    // tp_both_upper: across the inflection, up to d_upper
  kBranchLower = 4,  // around a minimum, folded (BoundSin.get_bound_tb)
  kBranchUpper = 5,  // around a maximum, folded
  kEntries = 6,
};

// BoundSin's tables: entries on [0, 2π] and bisection steps.
constexpr int64_t kTableEntries = 1001;
constexpr int kTableBisections = 20;

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

class BoundTrig final : public TangentEntriesNode<BoundTrig> {
 public:
  explicit BoundTrig(Trig f) : f_(f), phase_(f == Trig::kSin ? 0.0 : kPi / 2) {}
  std::string op_type() const override { return f_ == Trig::kSin ? "Sin" : "Cos"; }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splits_anywhere = true};
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

 private:
  friend class TangentEntriesNode<BoundTrig>;

  // α's plan (header comment): per entry its initial value and range ([kEntries, B, *shape]);
  // per line ([2, B, *shape]: lower, upper) the entry it takes, whether it is a fixed line
  // (slope `fixed_k`) and, for the tangent's gradient, where the tangent point t lies in w:
  // t + shift_left up to `pivot`, t + shift_right beyond (BoundSin's folded coordinate).
  struct TangentPlan {
    at::Tensor init, lo, hi;
    at::Tensor entry, fixed, fixed_k, pivot, shift_left, shift_right;
  };

  [[nodiscard]] TangentPlan tangent_plan(const Interval& in) const {
    const c10::NoGradGuard no_grad;
    const at::Tensor lw = in.lower + phase_;
    const at::Tensor uw = in.upper + phase_;
    const at::Tensor crown = crown_slopes(in);
    const at::Tensor inf = at::full_like(lw, std::numeric_limits<double>::infinity());
    const at::Tensor zero = at::zeros_like(lw);

    // BoundSin's branch_input_domain.
    const at::Tensor lc = lw - at::floor((lw + kPi / 2) / kTwoPi) * kTwoPi;
    const at::Tensor uc = uw - at::floor((uw + kPi / 2) / kTwoPi) * kTwoPi;
    const at::Tensor sigmoid = ((uw - lw) <= kPi) & (((lc <= kPi / 2) & (uc <= kPi / 2)) |
                                                     ((lc >= kPi / 2) & (uc >= kPi / 2)));
    const at::Tensor branch = ~sigmoid;
    const at::Tensor convex_l = -at::sin(lw) >= 0;  // f'' ≥ 0 at l
    const at::Tensor convex_u = -at::sin(uw) >= 0;
    const at::Tensor neg = convex_l & convex_u & sigmoid;    // convex: tangent below, chord above
    const at::Tensor pos = ~convex_l & ~convex_u & sigmoid;  // concave: chord below, tangent above
    const at::Tensor both = sigmoid & ~(neg | pos);

    // BoundTanh's lines on the monotone half-wave.
    const at::Tensor k_direct = (at::sin(uw) - at::sin(lw)) / (uw - lw).clamp_min(1e-8);
    const auto [d_lower, d_upper] = grid_tangent_points(lw, uw);
    const at::Tensor direct_lower =
        both & at::where(convex_l, k_direct<at::cos(lw), k_direct> at::cos(uw));
    const at::Tensor direct_upper =
        both & at::where(convex_l, k_direct<at::cos(uw), k_direct> at::cos(lw));

    // bound_relax_branch: the chord where it crosses f' = k once (it stays on one side of f).
    const at::Tensor ub = at::maximum(uw, lw + 1e-8);
    const at::Tensor close = (ub - lw) < 1e-3;
    const at::Tensor chord_k =
        at::where(close, at::cos(ub), (at::sin(ub) - at::sin(lw)) / (ub - lw).clamp_min(1e-10));
    const at::Tensor crossing1 = at::asin(chord_k) - kPi / 2;
    const at::Tensor crossing2 = kPi - crossing1 - kPi;
    const at::Tensor use_line = (crossings(lw, ub, crossing1) + crossings(lw, ub, crossing2)) == 1;
    const at::Tensor gap = at::sin((ub + lw) / 2) - (at::sin(ub) + at::sin(lw)) / 2;
    const at::Tensor branch_chord_lower = branch & use_line & (gap >= 0);
    const at::Tensor branch_chord_upper = branch & use_line & (gap < 0);
    const BranchTangents t = branch_tangents(lw, ub);

    TangentPlan plan;
    const at::Tensor mid_x = (in.lower + in.upper) / 2;  // BoundSin's α init, BoundCos's too
    plan.init = at::stack({mid_x, mid_x, d_lower, d_upper, t.lower_init, t.upper_init});
    plan.lo = at::stack({lw, lw, at::where(convex_l, lw, at::minimum(d_lower, uw)),
                         at::where(convex_l, at::minimum(d_upper, uw), lw),
                         at::minimum(t.left_lower, t.right_lower),
                         at::minimum(t.left_upper, t.right_upper)});
    plan.hi = at::stack({uw, uw, at::where(convex_l, at::maximum(d_lower, lw), uw),
                         at::where(convex_l, uw, at::maximum(d_upper, lw)), t.right_lower,
                         t.right_upper});

    const auto entry = [&](TangentEntry e) { return at::full_like(lw, int64_t{e}, at::kLong); };
    const at::Tensor lower_entry = at::where(
        both, entry(kBothLower), at::where(branch, entry(kBranchLower), entry(kMidLower)));
    const at::Tensor upper_entry = at::where(
        both, entry(kBothUpper), at::where(branch, entry(kBranchUpper), entry(kMidUpper)));
    plan.entry = at::stack({lower_entry, upper_entry});
    // Ours where BoundSin's lines are not ours to follow: a whole period or more, and a point.
    const at::Tensor own = ((in.upper - in.lower) >= kTwoPi) | ((in.upper - in.lower) < 1e-8);
    plan.fixed = at::stack({pos | direct_lower | branch_chord_lower | own,
                            neg | direct_upper | branch_chord_upper | own});
    plan.fixed_k =
        at::where(own, crown, at::where(branch, chord_k, k_direct).unsqueeze(0).expand_as(crown));
    plan.pivot = at::stack(
        {at::where(branch, zero + 1.5 * kPi, inf), at::where(branch, zero + 2.5 * kPi, inf)});
    plan.shift_left = at::stack(
        {at::where(branch, t.lower_left_shift, zero), at::where(branch, t.upper_left_shift, zero)});
    plan.shift_right = at::stack({at::where(branch, t.lower_right_shift, zero),
                                  at::where(branch, t.upper_right_shift, zero)});
    return plan;
  }

  // BoundSin.n_crossing: how many points s + 2πn lie in [start, end].
  [[nodiscard]] static at::Tensor crossings(const at::Tensor& start, const at::Tensor& end,
                                            const at::Tensor& s) {
    const at::Tensor cycles = at::floor((end - start) / kTwoPi);
    const at::Tensor real_s = s - at::floor((s - start) / kTwoPi) * kTwoPi;
    const at::Tensor real_end = end - cycles * kTwoPi;
    return ((real_s >= start) & (real_s <= real_end)).to(s.scalar_type()) + cycles;
  }

  // BoundSin.generate_d_lower_upper on w: the tangent points whose tangents pass through the
  // 0.01 grid point next beyond the far end of a monotone half-wave across its inflection (the
  // table of BoundTanh.precompute_relaxation, bisected here at that point), [B, *shape] each;
  // 0 where no case applies, as BoundSin.
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> grid_tangent_points(const at::Tensor& lw,
                                                                             const at::Tensor& uw) {
    constexpr double step = 0.01;
    const auto beyond = [](const at::Tensor& v) {
      return step * (at::trunc(v / step).clamp_min(0) + 1);
    };
    const at::Tensor ku = at::floor(uw / kTwoPi);
    const at::Tensor uc = uw - ku * kTwoPi;
    const at::Tensor kl = at::floor(lw / kTwoPi);
    const at::Tensor lc = lw - kl * kTwoPi;
    const at::Tensor zero = at::zeros_like(lw);
    // Rising, lower line through u; falling, upper line through u; rising, upper line through l;
    // falling, lower line through l (BoundSin's cases 1 to 4).
    const at::Tensor case1 = (uc >= 0) & (uc <= kPi / 2);
    const at::Tensor d1 = tangent_point_through(beyond(uc.clamp(0, kPi / 2))) + ku * kTwoPi;
    const at::Tensor case2 = (uc >= kPi) & (uc <= 1.5 * kPi);
    const at::Tensor d2 =
        kPi + tangent_point_through(beyond(uc.clamp(kPi, 1.5 * kPi) - kPi)) + ku * kTwoPi;
    const at::Tensor case3 = (lc >= 1.5 * kPi) & (lc <= kTwoPi);
    const at::Tensor d3 =
        -tangent_point_through(beyond(kTwoPi - lc.clamp(1.5 * kPi, kTwoPi))) + (kl + 1) * kTwoPi;
    const at::Tensor case4 = (lc >= kPi / 2) & (lc <= kPi);
    const at::Tensor d4 =
        kPi - tangent_point_through(beyond(kPi - lc.clamp(kPi / 2, 3 * kPi))) + kl * kTwoPi;
    return {at::where(case1, d1, zero) + at::where(case4, d4, zero),
            at::where(case2, d2, zero) + at::where(case3, d3, zero)};
  }

  // BoundSin's tables (get_lower_left_bound and the others, 20 bisections) at w: the tangent
  // point in BoundSin's folded coordinate and the cycles it is shifted by. The lower table
  // searches [π, 1.5π], the upper [2π, 2.5π]; a tangent above the sine at w moves the lower
  // search left and the upper one right.
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> left_table(const at::Tensor& xl,
                                                                    bool lower) {
    const double start = lower ? kPi : kTwoPi;
    const at::Tensor cycles = at::floor((xl + (lower ? kPi : -kPi) / 2) / kTwoPi) * kTwoPi;
    const at::Tensor x = xl - cycles;
    at::Tensor left = at::full_like(x, start);
    at::Tensor right = at::full_like(x, start + kPi / 2);
    at::Tensor last_right = right;
    for (int i = 0; i < kTableBisections; ++i) {
      const at::Tensor mid = (left + right) / 2;
      const at::Tensor up = at::sin(x) - (at::cos(mid) * (x - mid) + at::sin(mid)) > 0;
      const at::Tensor go_left = lower ? up : at::logical_not(up);
      right = at::where(go_left, mid, right);
      last_right = at::where(go_left, mid, last_right);
      left = at::where(go_left, left, mid);
    }
    return {at::where(x >= start, x, last_right), cycles};
  }
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> lower_left(const at::Tensor& xl) {
    return left_table(xl, true);
  }
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> upper_left(const at::Tensor& xl) {
    return left_table(xl, false);
  }
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> lower_right(const at::Tensor& xu) {
    const at::Tensor cycles = at::floor((xu + kPi / 2) / kTwoPi) * kTwoPi;
    return {3 * kPi - lower_left(kPi - (xu - cycles)).first, cycles - kTwoPi};
  }
  [[nodiscard]] static std::pair<at::Tensor, at::Tensor> upper_right(const at::Tensor& xu) {
    const at::Tensor cycles = at::floor((xu - kPi / 2) / kTwoPi) * kTwoPi;
    return {5 * kPi - upper_left(3 * kPi - (xu - cycles)).first, cycles - kTwoPi};
  }

  // BoundSin.get_bound_tb on [lb, ub] (w): the folded tangent points from its tables at l and at
  // u (the ends of α's range), their shifts, and α's initial points (from the midpoint).
  struct BranchTangents {
    at::Tensor left_lower, right_lower, left_upper, right_upper;
    at::Tensor lower_left_shift, lower_right_shift, upper_left_shift, upper_right_shift;
    at::Tensor lower_init, upper_init;
  };
  [[nodiscard]] static BranchTangents branch_tangents(const at::Tensor& lb, const at::Tensor& ub) {
    const at::Tensor grid = at::linspace(0, kTwoPi, kTableEntries, lb.options());
    const auto [ll, ll_cycles] = lower_left(grid);
    const auto [lu, lu_cycles] = upper_left(grid);
    const auto [rl, rl_cycles] = lower_right(grid);
    const auto [ru, ru_cycles] = upper_right(grid);
    const double step = kTwoPi / double(kTableEntries - 1);
    const at::Tensor lb_cycles = at::floor(lb / kTwoPi) * kTwoPi;
    const at::Tensor ub_cycles = at::floor(ub / kTwoPi) * kTwoPi;
    const auto index = [&](const at::Tensor& v, const at::Tensor& cycles) {
      return at::trunc((v - cycles).clamp(0, kTwoPi) / step).to(at::kLong);
    };
    const at::Tensor il = index(lb, lb_cycles);
    const at::Tensor iu = index(ub, ub_cycles);
    const auto at_index = [](const at::Tensor& table, const at::Tensor& i) {
      return table.index({i.reshape({-1})}).reshape(i.sizes());
    };
    BranchTangents t;
    t.left_lower = at_index(ll, il);
    t.left_upper = at_index(lu, il);
    t.right_lower = at_index(rl, iu);
    t.right_upper = at_index(ru, iu);
    t.lower_left_shift = at_index(ll_cycles, il) + lb_cycles;
    t.upper_left_shift = at_index(lu_cycles, il) + lb_cycles;
    t.lower_right_shift = at_index(rl_cycles, iu) + ub_cycles;
    t.upper_right_shift = at_index(ru_cycles, iu) + ub_cycles;
    // The initial points: BoundSin's masks on the midpoint (they add, as there).
    const at::Tensor mid = (lb + ub) / 2;
    const auto initial = [&](const at::Tensor& left, const at::Tensor& right,
                             const at::Tensor& left_shift, const at::Tensor& right_shift,
                             double extreme) {
      const at::Tensor unfolded_left = left + left_shift;
      const at::Tensor left_end = extreme + left_shift;
      const at::Tensor unfolded_right = right + right_shift;
      const at::Tensor right_end = extreme + right_shift;
      const auto m = [&](const at::Tensor& b) { return b.to(lb.scalar_type()); };
      return m((mid < unfolded_left) & (unfolded_left <= ub)) * left +
             m((mid >= unfolded_left) & (mid <= left_end)) * (mid - left_shift) +
             m((mid > left_end) & (mid < right_end)) * extreme +
             m((mid > unfolded_right) & (unfolded_right >= lb)) * right +
             m((mid >= right_end) & (mid <= unfolded_right)) * (mid - right_shift);
    };
    t.lower_init =
        initial(t.left_lower, t.right_lower, t.lower_left_shift, t.lower_right_shift, 1.5 * kPi);
    t.upper_init =
        initial(t.left_upper, t.right_upper, t.upper_left_shift, t.upper_right_shift, 2.5 * kPi);
    return t;
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

  // The lines for bounds `pre` with tangent points `t` ([rows, kEntries, B, *shape], projected;
  // `plan` is tangent_plan(pre)) or CROWN's slopes when undefined (header comment).
  [[nodiscard]] ElementwiseLines lines(const Interval& pre, const at::Tensor& t,
                                       const TangentPlan& plan) const {
    ElementwiseLines out;
    if (!t.defined()) {
      const at::Tensor k = crown_slopes(pre);
      out.lower_k = k[kLowerLine];
      out.upper_k = k[kUpperLine];
      out.lower_b = tightest_intercepts(pre.lower, pre.upper, out.lower_k).first;
      out.upper_b = tightest_intercepts(pre.lower, pre.upper, out.upper_k).second;
      return out;
    }
    const auto line = [&](int64_t which) {
      // The entry of each neuron: [B, *shape] -> [rows, 1, B, *shape] along t's entry dimension.
      std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
      shape[1] = 1;
      const at::Tensor entry = plan.entry[which].unsqueeze(0).unsqueeze(0).expand(shape);
      const at::Tensor tp = t.gather(1, entry).squeeze(1);
      const at::Tensor fixed = plan.fixed[which];
      const at::Tensor k = at::where(fixed, plan.fixed_k[which], at::cos(tp));
      const auto tight = tightest_intercepts(pre.lower, pre.upper, k);
      const at::Tensor b = which == kLowerLine ? tight.first : tight.second;
      // The tangent at w = tp + shift, as a line in x = w − φ.
      const at::Tensor shift =
          at::where(tp <= plan.pivot[which], plan.shift_left[which], plan.shift_right[which]);
      const at::Tensor tangent_b = at::sin(tp) - k * (tp + shift - phase_);
      return std::pair{k, at::where(fixed, b, b.detach() + (tangent_b - tangent_b.detach()))};
    };
    std::tie(out.lower_k, out.lower_b) = line(kLowerLine);
    std::tie(out.upper_k, out.upper_b) = line(kUpperLine);
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

NodePtr make_sin() { return std::make_unique<BoundTrig>(Trig::kSin); }
NodePtr make_cos() { return std::make_unique<BoundTrig>(Trig::kCos); }

void register_trig(OpRegistry& r) {
  r.add("Sin", {.first = 7}, lower_trig<Trig::kSin>);
  r.add("Cos", {.first = 7}, lower_trig<Trig::kCos>);
}

}  // namespace distcrown::ops
