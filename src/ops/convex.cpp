// Convex elementwise functions: Exp, and Reciprocal on positive inputs. Linear relaxation as
// auto_LiRPA's BoundExp / BoundReciprocal (operators/convex_concave.py at bfb7997), for input
// bounds [l, u] per neuron ([batch, *shape]):
//   upper  the chord l→u (above a convex f on [l, u])
//   lower  the tangent at t (below a convex f everywhere on its domain); CROWN takes
//          t = min((l + u)/2, l + 0.99) for Exp (auto_LiRPA keeps the point near l, where exp is
//          small, for wide intervals) and t = (l + u)/2 for Reciprocal; α-CROWN optimises t per
//          side (P = [batch, *shape]), projected onto [l, u] before each use.
// Reciprocal needs l > 0 (auto_LiRPA asserts it): an interval reaching 0 or below is a clear
// NumericError, not a bound. Where the input has a known floor f > 0 (GraphBuilder::known_floor:
// √(var + ε) ≥ √ε in a LayerNorm) the input interval is clamped at f first: every real input
// satisfies it, while CROWN's intermediate bounds (not intersected with IBP) may reach below.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/util/error.hpp"
#include "ops/convex.hpp"
#include "tangent_point.hpp"

namespace distcrown::ops {
namespace {

enum class Convex { kExp, kReciprocal };

class BoundConvex final : public TangentPointElementwise {
 public:
  explicit BoundConvex(Convex f, std::optional<double> input_floor = std::nullopt)
      : TangentPointElementwise(
            f == Convex::kExp ? Direction::kNonDecreasing : Direction::kNonIncreasing, input_floor),
        f_(f) {}
  std::string op_type() const override { return f_ == Convex::kExp ? "Exp" : "Reciprocal"; }
  at::Tensor apply(const at::Tensor& x) const override {
    return f_ == Convex::kExp ? at::exp(x) : at::reciprocal(x);
  }

  double known_floor(std::span<const double> in) const override {
    if (f_ == Convex::kExp) return std::isnan(in[0]) ? 0.0 : std::exp(in[0]);
    return std::numeric_limits<double>::quiet_NaN();
  }

 private:
  void require_domain(const Interval& in) const override {
    if (f_ == Convex::kReciprocal && !(in.lower > 0).all().item<bool>()) {
      throw NumericError("Reciprocal of an input interval that reaches 0 or below (lower bound " +
                         std::to_string(in.lower.min().item<double>()) +
                         "): only positive inputs are supported");
    }
  }

  // Tangent at t ([B, *shape] or [rows, B, *shape], projected) or CROWN's point when undefined.
  ElementwiseLines lines(const Interval& pre, const at::Tensor& t_given) const override {
    const at::Tensor& l = pre.lower;
    const at::Tensor& u = pre.upper;
    ElementwiseLines out;
    if (f_ == Convex::kExp) {
      const at::Tensor mid = t_given.defined() ? t_given : (l + u) / 2;
      const at::Tensor t = at::minimum(mid, l + 0.99);
      const at::Tensor et = at::exp(t);
      out.lower_k = et;
      out.lower_b = et - et * t;
      // The chord, with bounds clamped at −1e9 as auto_LiRPA (an input bound of −inf would make
      // it NaN).
      const at::Tensor lc = l.clamp_min(-1e9);
      const at::Tensor uc = u.clamp_min(-1e9);
      const at::Tensor el = at::exp(l);
      out.upper_k = (at::exp(u) - el) / (uc - lc).clamp_min(1e-8);
      out.upper_b = el - out.upper_k * lc;
    } else {
      // auto_LiRPA keeps an optimised tangent point at least 0.01 (any point > 0 is sound).
      const at::Tensor t = t_given.defined() ? t_given.clamp_min(0.01) : (l + u) / 2;
      out.lower_k = -1.0 / (t * t);
      out.lower_b = 2.0 / t;  // 1/t − k·t
      out.upper_k = -1.0 / (l * u);
      out.upper_b = 1.0 / l + 1.0 / u;  // 1/l − k·l
    }
    return out;
  }

  Convex f_;
};

template <Convex F>
Value lower_convex(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(BoundConvex(F).apply(ctx.constant(0)));
  const int x = ctx.bounded(0);
  if (F == Convex::kReciprocal)
    return ctx.emit(make_reciprocal_of(ctx.builder.known_floor(x)), {x});
  return ctx.emit(std::make_unique<BoundConvex>(F), {x});
}

}  // namespace

NodePtr make_exp() { return std::make_unique<BoundConvex>(Convex::kExp); }
NodePtr make_reciprocal() { return std::make_unique<BoundConvex>(Convex::kReciprocal); }
NodePtr make_reciprocal_at_least(double input_floor) {
  // A floor ≤ 0 says nothing Reciprocal's domain check does not.
  return std::make_unique<BoundConvex>(Convex::kReciprocal,
                                       input_floor > 0 ? std::optional(input_floor) : std::nullopt);
}
NodePtr make_reciprocal_of(double known_floor) {
  // Shrunk by 1e-6 (relative) so float rounding of the input never falls below it.
  if (known_floor > 0) return make_reciprocal_at_least(known_floor * (1 - 1e-6));
  return make_reciprocal();
}

void register_convex(OpRegistry& r) {
  r.add("Exp", kAllOpsets, lower_convex<Convex::kExp>);
  r.add("Reciprocal", kAllOpsets, lower_convex<Convex::kReciprocal>);
}

}  // namespace distcrown::ops
