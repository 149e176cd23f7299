// S-shaped activations, Sigmoid, Tanh and Erf: increasing, convex below 0 and concave above 0
// (the inflection point). Erf (the Gauss error function, in exported GELUs) takes the same
// relaxation with its own derivative 2/√π·e^(−x²); its table is built by the same bisection. Linear
// relaxation as auto_LiRPA's BoundTanh (operators/tanh.py at bfb7997) for pre-activation bounds [l,
// u], per neuron ([batch, *shape]):
//   u ≤ 0 (convex):   lower = tangent at t_neg ∈ [l, u],          upper = chord l→u
//   l ≥ 0 (concave):  lower = chord l→u,                          upper = tangent at t_pos ∈ [l, u]
//   l < 0 < u:        lower = chord if f'(l) > chord slope, else the tangent at a point
//                     t_bl ≤ d_lower(u) (≤ 0) whose tangent stays below f up to u;
//                     upper = chord if f'(u) > chord slope, else the tangent at t_bu ≥ d_upper(l)
// CROWN takes t_neg = t_pos = (l + u)/2, t_bl = d_lower(u), t_bu = d_upper(l); α-CROWN optimises
// the four tangent points per side (P = [4, batch, *shape]: t_pos, t_neg, t_bl, t_bu), projected
// before each use onto the ranges above.
// d_lower / d_upper come from a table over a 0.01 grid up to 500, built by auto_LiRPA's bisection
// and read at the grid point beyond the bound (so the tangent is valid with margin). Where a bound
// is beyond the table auto_LiRPA falls back to the tangent at the other bound, which is not always
// sound (tangent at l = −0.1 with u = 600 rises far above 1); we use the constant f(l) (resp.
// f(u)) there: sound because f is increasing.
#include <ATen/ATen.h>

#include <numbers>

#include "elementwise_lines.hpp"
#include "ops/monotone.hpp"
#include "ops/s_shaped.hpp"

namespace distcrown::ops {
namespace {

enum class SShape { kSigmoid, kTanh, kErf };

at::Tensor s_value(SShape s, const at::Tensor& x) {
  switch (s) {
    case SShape::kSigmoid:
      return at::sigmoid(x);
    case SShape::kErf:
      return at::erf(x);
    case SShape::kTanh:
      break;
  }
  return at::tanh(x);
}

// f'(x), as auto_LiRPA computes it (the tanh derivative is 0 beyond |x| = 25, where cosh² would
// overflow float32).
at::Tensor s_slope(SShape s, const at::Tensor& x) {
  if (s == SShape::kSigmoid) {
    const at::Tensor y = at::sigmoid(x);
    return y * (1 - y);
  }
  if (s == SShape::kErf) return 2 * std::numbers::inv_sqrtpi * at::exp(-x * x);
  const at::Tensor inside = (x.abs() < 25.0).to(x.scalar_type());
  return inside * (1.0 / at::cosh(inside * x + 1 - inside).pow(2));
}

constexpr double kTableStep = 0.01;
constexpr int64_t kTablePoints = 50000 + 5;  // auto_LiRPA: int(500 / 0.01) + 5 grid points

// Tangent points by bisection (auto_LiRPA's precompute_relaxation), in dtype `dtype`:
//   lower[i]: the tangent at lower[i] ≤ 0 lies below f at x = i·step (so on (−∞, i·step]);
//   upper[i]: the tangent at upper[i] ≥ 0 lies above f at x = −i·step (so on [−i·step, ∞)).
struct TangentTable {
  at::Tensor lower;  // [kTablePoints]
  at::Tensor upper;  // [kTablePoints]
};

TangentTable build_table(SShape s, at::ScalarType dtype) {
  const auto f = [s](const at::Tensor& x) { return s_value(s, x); };
  const auto df = [s](const at::Tensor& x) { return s_slope(s, x); };
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor grid = at::arange(kTablePoints, at::kLong).to(dtype) * kTableStep;
  constexpr int kBisections = 100;
  TangentTable t;
  {
    // below(d): the tangent at d is ≤ f(grid).
    const auto below = [&](const at::Tensor& d) {
      return (df(d) * (grid - d) + f(d) <= f(grid)).to(dtype);
    };
    at::Tensor l = -at::ones({kTablePoints}, opts);
    at::Tensor r = at::zeros({kTablePoints}, opts);
    for (at::Tensor ok = below(l); !ok.all().item<bool>(); ok = below(l))
      l = ok * l + (1 - ok) * l * 2;
    for (int i = 0; i < kBisections; ++i) {
      const at::Tensor m = (l + r) / 2;
      const at::Tensor ok = below(m);
      l = ok * m + (1 - ok) * l;
      r = ok * r + (1 - ok) * m;
    }
    t.lower = l;
  }
  {
    const at::Tensor neg = -grid;
    const auto above = [&](const at::Tensor& d) {
      return (df(d) * (neg - d) + f(d) >= f(neg)).to(dtype);
    };
    at::Tensor l = at::zeros({kTablePoints}, opts);
    at::Tensor r = at::ones({kTablePoints}, opts);
    for (at::Tensor ok = above(r); !ok.all().item<bool>(); ok = above(r))
      r = ok * r + (1 - ok) * r * 2;
    for (int i = 0; i < kBisections; ++i) {
      const at::Tensor m = (l + r) / 2;
      const at::Tensor ok = above(m);
      l = (1 - ok) * m + ok * l;
      r = (1 - ok) * r + ok * m;
    }
    t.upper = r;
  }
  return t;
}

// The table of (S, dtype): built on first use, immutable afterwards.
template <SShape S, at::ScalarType T>
const TangentTable& table_of() {
  static const TangentTable table = build_table(S, T);
  return table;
}
const TangentTable& tangent_table(SShape s, at::ScalarType dtype) {
  const bool f64 = dtype == at::kDouble;
  if (s == SShape::kSigmoid) {
    return f64 ? table_of<SShape::kSigmoid, at::kDouble>()
               : table_of<SShape::kSigmoid, at::kFloat>();
  }
  if (s == SShape::kErf) {
    return f64 ? table_of<SShape::kErf, at::kDouble>() : table_of<SShape::kErf, at::kFloat>();
  }
  return f64 ? table_of<SShape::kTanh, at::kDouble>() : table_of<SShape::kTanh, at::kFloat>();
}

// The table entry for bound `b` ≥ 0 ([batch, *shape]): the grid point after b, as auto_LiRPA
// reads it. `inside` is false where b is beyond the table.
struct Lookup {
  at::Tensor point;
  at::Tensor inside;
};
Lookup look_up(const at::Tensor& table, const at::Tensor& b) {
  const at::Tensor index = (b / kTableStep).to(at::kLong).clamp_min(0) + 1;
  const at::Tensor inside = index < table.numel();
  const at::Tensor point =
      table.to(b.device()).index_select(0, index.clamp_max(table.numel() - 1).reshape({-1}));
  return {point.reshape(b.sizes()), inside};
}

// Index of each tangent point in P = [4, batch, *shape].
enum TangentPoint : int64_t { kPos = 0, kNeg = 1, kBothLower = 2, kBothUpper = 3 };

class BoundSShaped final : public MonotoneElementwise {
 public:
  explicit BoundSShaped(SShape s) : MonotoneElementwise(Direction::kNonDecreasing), s_(s) {}
  std::string op_type() const override {
    return s_ == SShape::kSigmoid ? "Sigmoid" : s_ == SShape::kErf ? "Erf" : "Tanh";
  }
  at::Tensor apply(const at::Tensor& x) const override { return s_value(s_, x); }
  OpTraits traits() const override {
    return {.elementwise = true,
            .needs_input_bounds = true,
            .relaxation_params = true,
            .splits_anywhere = true};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    return backward_relaxed(a, bounds, bias, RelaxParams{});
  }

  at::Tensor initial_relaxation_params(const Interval& in) const override {
    const Ranges r = ranges(in);
    const at::Tensor mid = (in.lower + in.upper) / 2;
    return at::stack({mid, mid, r.d_lower.point, r.d_upper.point});  // [4, B, *shape]
  }

  void project_relaxation_params(at::Tensor& alpha, const Interval& in) const override {
    // alpha [2, rows, 4, B, *shape]; the bounds broadcast over the first two dims.
    const Ranges r = ranges(in);
    for (const int64_t k : {kPos, kNeg}) {
      at::Tensor t = alpha.select(2, k);
      t.copy_(at::maximum(at::minimum(t, in.upper), in.lower));
    }
    at::Tensor bl = alpha.select(2, kBothLower);
    bl.copy_(at::minimum(bl, r.d_lower.point));
    at::Tensor bu = alpha.select(2, kBothUpper);
    bu.copy_(at::maximum(bu, r.d_upper.point));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    const Interval& pre = *bounds[0];
    return {relax_elementwise(a, bias, p.alpha_l, p.alpha_u,
                              [&](const at::Tensor& tp) { return lines(pre, tp); })};
  }

 private:
  struct Ranges {
    Lookup d_lower;  // tangent point valid below f up to u
    Lookup d_upper;  // tangent point valid above f down to l
  };
  Ranges ranges(const Interval& in) const {
    const TangentTable& t = tangent_table(s_, in.lower.scalar_type());
    return {look_up(t.lower, in.upper), look_up(t.upper, -in.lower)};
  }

  // The relaxation for bounds `pre`, with tangent points `tp` ([rows, 4, B, *shape], projected)
  // or CROWN's when undefined.
  ElementwiseLines lines(const Interval& pre, const at::Tensor& tp) const {
    const at::Tensor& l = pre.lower;
    const at::Tensor& u = pre.upper;
    const at::Tensor yl = apply(l);
    const at::Tensor yu = apply(u);
    const auto [chord_k, chord_b] = chord(l, u, yl, yu);
    const at::Tensor pos = l >= 0;
    const at::Tensor neg = u <= 0;
    const at::Tensor both = (pos | neg).logical_not();
    const Ranges r = ranges(pre);
    at::Tensor t_pos;
    at::Tensor t_neg;
    at::Tensor t_bl;
    at::Tensor t_bu;
    if (tp.defined()) {
      t_pos = tp.select(1, kPos);
      t_neg = tp.select(1, kNeg);
      t_bl = tp.select(1, kBothLower);
      t_bu = tp.select(1, kBothUpper);
    } else {
      t_pos = t_neg = (l + u) / 2;
      t_bl = r.d_lower.point;
      t_bu = r.d_upper.point;
    }
    const auto tangent = [this](const at::Tensor& t) {
      return tangent_line(t, apply(t), s_slope(s_, t));
    };
    const at::Tensor zero = at::zeros_like(l);
    // Lower line. With l = u = 0 both `pos` and `neg` hold: the tangent (exact there) wins.
    const auto [neg_k, neg_b] = tangent(t_neg);
    const auto [bl_k, bl_b] = tangent(t_bl);
    const at::Tensor lower_chord = pos | (both & (chord_k < s_slope(s_, l)));
    ElementwiseLines out;
    out.lower_k = at::where(
        neg, neg_k, at::where(lower_chord, chord_k, at::where(r.d_lower.inside, bl_k, zero)));
    out.lower_b = at::where(neg, neg_b,
                            at::where(lower_chord, chord_b, at::where(r.d_lower.inside, bl_b, yl)));
    // Upper line.
    const auto [pos_k, pos_b] = tangent(t_pos);
    const auto [bu_k, bu_b] = tangent(t_bu);
    const at::Tensor upper_chord = neg | (both & (chord_k < s_slope(s_, u)));
    out.upper_k = at::where(
        pos, pos_k, at::where(upper_chord, chord_k, at::where(r.d_upper.inside, bu_k, zero)));
    out.upper_b = at::where(pos, pos_b,
                            at::where(upper_chord, chord_b, at::where(r.d_upper.inside, bu_b, yu)));
    return out;
  }

  SShape s_;
};

template <SShape S>
Value lower_s_shaped(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(s_value(S, ctx.constant(0)));
  return ctx.emit(std::make_unique<BoundSShaped>(S), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_sigmoid() { return std::make_unique<BoundSShaped>(SShape::kSigmoid); }
NodePtr make_tanh() { return std::make_unique<BoundSShaped>(SShape::kTanh); }
NodePtr make_erf() { return std::make_unique<BoundSShaped>(SShape::kErf); }

void register_s_shaped(OpRegistry& r) {
  r.add("Sigmoid", kAllOpsets, lower_s_shaped<SShape::kSigmoid>);
  r.add("Tanh", kAllOpsets, lower_s_shaped<SShape::kTanh>);
  r.add("Erf", {.first = 9}, lower_s_shaped<SShape::kErf>);
}

}  // namespace distcrown::ops
