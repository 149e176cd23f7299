// Relaxations of the nonlinear elementwise operators (ops/s_shaped.cpp: Sigmoid, Tanh;
// ops/convex.cpp: Exp, Reciprocal; ops/power.cpp: Pow, Sqrt) on the edges: every linear bound the
// operator hands to CROWN (its own choice, and any parameters α-CROWN may reach after projection)
// lies below resp. above f on the whole interval, in float32 and float64. S-shaped: zero-width
// intervals, intervals straddling the inflection point, one-sided and saturated ones, and intervals
// beyond the tangent table (|bound| > 500, where auto_LiRPA's fallback tangent is not sound).
// Convex: zero width, narrow and very wide intervals, near the domain's edge. Sin and Cos (ops/
// trig.cpp): narrow and zero-width intervals, each curvature, across the inflection, around one
// extremum, around both, a whole period and several, far from 0; and IBP exact on each of them.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "onnx_builder.hpp"

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown {
namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Pre-activation intervals [l, u], one per neuron.
const Intervals kSShapedIntervals = {
    {-3, -3},  {0, 0},        {2, 2},          {40, 40},     {-1, 1},     {-0.3, 2},
    {-4, 0.5}, {-1e-7, 1e-7}, {-0.001, 0.002}, {-5, -0.1},   {0.1, 5},    {-5, 0},
    {0, 5},    {-20, 20},     {-100, 3},       {-0.1, 600},  {-600, 0.1}, {-700, 700},
    {30, 40},  {-40, -30},    {15, 60},        {-2.5, 1e-3}, {-1e-3, 2.5}};
const Intervals kExpIntervals = {{-3, -3}, {0, 0},        {-1, 1},   {-20, 5},  {-100, -99},
                                 {5, 40},  {-1e-7, 1e-7}, {-60, 30}, {0.5, 0.6}};
const Intervals kReciprocalIntervals = {{0.01, 0.01}, {0.5, 2},    {1e-3, 100}, {3, 3},
                                        {0.1, 0.2},   {1e-3, 1e3}, {50, 51},    {0.004, 0.02}};

// Pow: the exponent is a constant second input; Sqrt: on x ≥ 0 only.
const Intervals kEvenPowIntervals = {{-3, -3}, {0, 0},     {-1, 1},       {-20, 5},  {-0.1, 3},
                                     {2, 7},   {-9, -8.5}, {-1e-7, 1e-7}, {-50, 50}, {0.5, 0.6}};
const Intervals kOddPowIntervals = {
    {-3, -3},  {0, 0},    {2, 2},          {-1, 1},       {-20, 5},  {-5, 20},  {-0.1, 3},
    {-3, 0.1}, {2, 7},    {-9, -8.5},      {-1e-7, 1e-7}, {-50, 50}, {-1, 1.9}, {-1, 2.1},
    {-2.1, 1}, {-1.9, 1}, {-0.001, 0.002}, {0, 5},        {-5, 0}};
const Intervals kSqrtIntervals = {{0, 0},      {0, 1},   {4, 4},   {1e-6, 1e-6}, {0.5, 2},
                                  {1e-3, 100}, {0, 1e4}, {50, 51}, {1e-8, 1e-3}};

// Sin / Cos: points, narrow, one curvature, across an inflection (0, π), around a maximum (π/2,
// for Cos 0) or a minimum (3π/2, for Cos π), around both, just under and just over a period,
// several periods, far from 0 (float32 spacing ~1e-4 at 1000).
const Intervals kTrigIntervals = {
    {0, 0},       {1, 1},       {-2, -2},   {1e-7, 2e-7},      {0.2, 0.3},    {0.1, 1.4},
    {-1.4, -0.1}, {-0.3, 0.4},  {2.8, 3.5}, {-1.5707, 1.5707}, {1, 2},        {4, 5},
    {-0.5, 0.5},  {2.5, 3.8},   {1.6, 3.0}, {-0.2, 1.5},       {-1.5, 4.6},   {0, 6.2},
    {0, 6.3},     {-3, 3},      {-10, 10},  {100, 101.5},      {-1000, -998}, {-20, 1},
    {5.5, 7.5},   {-7.9, -7.7}, {0.7, 3.9}};

// Gelu: each of BoundGelu's cases (convex [−√2, √2], concave beyond, straddling ±√2 on either
// side, around the minimum at −0.7518), points and very wide intervals.
const Intervals kGeluIntervals = {
    {-3, -3},   {0, 0},       {-1e-7, 1e-7}, {-1, 1},       {-0.3, 2},    {-4, 0.5},  {-5, -0.1},
    {0.1, 5},   {-5, 0},      {0, 5},        {-20, 20},     {-100, 3},    {-2, -1},   {1, 1.3},
    {1.5, 3},   {-1.3, -0.2}, {-1.5, 1.2},   {-1, 1.6},     {-1.9, -0.5}, {0.2, 1.6}, {-0.8, -0.7},
    {-30, -20}, {20, 30},     {-10, -1},     {-0.76, -0.74}};

struct OpIntervals {
  std::string op;
  Intervals intervals;
  double exponent = 0;  // Pow's constant exponent; 0 for a one-input op
  [[nodiscard]] std::string name() const {
    return exponent == 0 ? op : op + std::to_string(int(exponent));
  }
};
[[maybe_unused]] void PrintTo(const OpIntervals& c, std::ostream* os) { *os << c.name(); }

// x [1, n] -> op -> y (Pow: x^exponent, the exponent an initializer): the op is node 1.
BoundGraph one_op_graph(const std::string& op_type, int64_t n, double exponent = 0) {
  testing::OnnxBuilder b;
  if (op_type == "Gelu") b.model().opset = 20;
  b.input("x", {1, n}).output("y", {1, n});
  if (exponent != 0) {
    b.initializer("p", at::tensor(exponent, at::kFloat));
    b.node("op", op_type, {"x", "p"}, {"y"});
  } else {
    b.node("op", op_type, {"x"}, {"y"});
  }
  return io::load_onnx_bytes(b.bytes(), op_type + ".onnx");
}

struct Lines {
  at::Tensor lower_k, lower_b, upper_k, upper_b;  // [n]
};

// The lines the node uses for each neuron: backward through it from identity rows.
Lines lines_of(const BoundNode& op, const Interval& pre, const RelaxParams& p) {
  const int64_t n = pre.lower.size(1);
  const at::Tensor eye = at::eye(n, pre.lower.options()).reshape({n, 1, n});
  BiasPair bias;
  const Interval* in[] = {&pre};
  const auto out = op.backward_relaxed(BoundA{eye, eye.clone()}, in, bias, p);
  return {out[0].lA.reshape({n, n}).diagonal(), bias.lower.reshape({n}),
          out[0].uA.reshape({n, n}).diagonal(), bias.upper.reshape({n})};
}

double eps_of(at::ScalarType t) { return t == at::kFloat ? 1.19e-7 : 2.3e-16; }

// Below/above f at 2001 points of every interval (endpoints included), up to a few ulps.
void expect_bounds_f(const BoundGraph& g, const Interval& pre, const Lines& l,
                     const Intervals& intervals, const std::string& what) {
  const auto type = pre.lower.scalar_type();
  const at::Tensor t = at::linspace(0, 1, 2001, at::TensorOptions().dtype(type)).unsqueeze(1);
  const at::Tensor x = at::minimum(pre.lower + (pre.upper - pre.lower) * t, pre.upper);  // [S, n]
  const at::Tensor y = g.forward(x).to(at::kDouble);
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor lo = l.lower_k.to(at::kDouble) * xd + l.lower_b.to(at::kDouble);
  const at::Tensor hi = l.upper_k.to(at::kDouble) * xd + l.upper_b.to(at::kDouble);
  // Rounding is relative to the terms summed, |k·x| and |b|, not to their sum: a steep chord over
  // a wide interval (exp on [5, 40]: k·x ≈ 3e16 at x = 5 where f = 148) cancels, as it does in
  // every CROWN pass that uses it.
  const auto terms = [&](const at::Tensor& k, const at::Tensor& b) {
    return at::maximum((k.to(at::kDouble) * xd).abs(), b.to(at::kDouble).abs());
  };
  const at::Tensor scale =
      at::maximum(at::maximum(terms(l.lower_k, l.lower_b), terms(l.upper_k, l.upper_b)), y.abs())
          .clamp_min(1.0);
  const at::Tensor tol = 16 * eps_of(type) * scale;
  for (int64_t j = 0; j < x.size(1); ++j) {
    const double over = (lo.select(1, j) - y.select(1, j) - tol.select(1, j)).max().item<double>();
    const double under = (y.select(1, j) - hi.select(1, j) - tol.select(1, j)).max().item<double>();
    EXPECT_LE(over, 0) << what << ": lower line above f on [" << intervals[size_t(j)].first << ", "
                       << intervals[size_t(j)].second << "]";
    EXPECT_LE(under, 0) << what << ": upper line below f on [" << intervals[size_t(j)].first << ", "
                        << intervals[size_t(j)].second << "]";
  }
}

Interval edge_intervals(const Intervals& intervals, at::ScalarType type) {
  std::vector<double> lo;
  std::vector<double> hi;
  for (const auto& [l, u] : intervals) {
    lo.push_back(l);
    hi.push_back(u);
  }
  const auto n = int64_t(lo.size());
  return {at::tensor(lo, at::kDouble).reshape({1, n}).to(type),
          at::tensor(hi, at::kDouble).reshape({1, n}).to(type)};
}

// α of every row of a pass over all n neurons: [2, n, *P] from the initial parameters P.
at::Tensor alpha_rows(const at::Tensor& init, int64_t n) {
  std::vector<int64_t> full{2, n};
  full.insert(full.end(), init.sizes().begin(), init.sizes().end());
  return init.unsqueeze(0).unsqueeze(0).expand(full).clone();
}

class Relaxation : public ::testing::TestWithParam<OpIntervals> {};

TEST_P(Relaxation, CrownLinesBoundTheFunctionOnEveryEdgeInterval) {
  c10::NoGradGuard no_grad;
  const OpIntervals& c = GetParam();
  for (const auto type : {at::kFloat, at::kDouble}) {
    const Interval pre = edge_intervals(c.intervals, type);
    BoundGraph g = one_op_graph(c.op, pre.lower.size(1), c.exponent);
    g.to_dtype(type);
    expect_bounds_f(g, pre, lines_of(*g.node(1).op, pre, {}), c.intervals,
                    c.op + (type == at::kFloat ? " f32" : " f64"));
  }
}

TEST_P(Relaxation, InitialParametersGiveCrownsLines) {
  c10::NoGradGuard no_grad;
  const OpIntervals& c = GetParam();
  if (c.op == "Sin" || c.op == "Cos" || c.op == "Gelu") {
    // Their α starts where auto_LiRPA's does (BoundSin's / BoundGelu's tangent points, from its
    // tables and midpoints), not at distcrown's CROWN lines; ProjectedParametersStaySound checks
    // those initial lines (spread 0) and test_op_refs that the optimisation then follows
    // auto_LiRPA's.
    GTEST_SKIP() << c.op << ": α starts at auto_LiRPA's tangent points";
  }
  const Interval pre = edge_intervals(c.intervals, at::kFloat);
  const int64_t n = pre.lower.size(1);
  const BoundGraph g = one_op_graph(c.op, n, c.exponent);
  const BoundNode& op = *g.node(1).op;
  ASSERT_TRUE(op.traits().relaxation_params);
  at::Tensor alpha = alpha_rows(op.initial_relaxation_params(pre), n);
  op.project_relaxation_params(alpha, pre);
  const Lines crown = lines_of(op, pre, {});
  const Lines with_init = lines_of(op, pre, alpha_params(alpha[0], alpha[1]));
  // Equal up to rounding: the per-row tensors take other vectorised paths through tanh, and Sin /
  // Cos store a slope k as asin(k) (sin(asin(k)) rounds). The lines are compared by their slopes
  // and their values at l and u, to 1e-6 of the terms k·x and b: an intercept alone moves by
  // Δk·x* for a slope rounded by Δk far from 0 (x* ≈ −1000), while the line barely moves on
  // [l, u].
  const auto same = [](const at::Tensor& a, const at::Tensor& b) {
    return at::allclose(a, b, 1e-6, 1e-7);
  };
  EXPECT_TRUE(same(crown.lower_k, with_init.lower_k));
  EXPECT_TRUE(same(crown.upper_k, with_init.upper_k));
  const auto same_values = [&](const at::Tensor& k1, const at::Tensor& b1, const at::Tensor& k2,
                               const at::Tensor& b2, const std::string& what) {
    for (const at::Tensor& x : {pre.lower[0], pre.upper[0]}) {
      const at::Tensor tol = 1e-6 * at::maximum((k1 * x).abs(), b1.abs()) + 1e-7;
      const at::Tensor diff = (k1 * x + b1 - (k2 * x + b2)).abs();
      EXPECT_TRUE((diff <= tol).all().item<bool>())
          << what << ": max difference " << diff.max().item<double>();
    }
  };
  same_values(crown.lower_k, crown.lower_b, with_init.lower_k, with_init.lower_b, "lower line");
  same_values(crown.upper_k, crown.upper_b, with_init.upper_k, with_init.upper_b, "upper line");
}

// Whatever values the optimiser gives the tangent points, projection keeps every line sound.
TEST_P(Relaxation, ProjectedParametersStaySound) {
  c10::NoGradGuard no_grad;
  const OpIntervals& c = GetParam();
  at::manual_seed(7);
  for (const auto type : {at::kFloat, at::kDouble}) {
    const Interval pre = edge_intervals(c.intervals, type);
    const int64_t n = pre.lower.size(1);
    BoundGraph g = one_op_graph(c.op, n, c.exponent);
    g.to_dtype(type);
    const BoundNode& op = *g.node(1).op;
    for (const double spread : {0.0, 0.1, 3.0, 1e3}) {
      const at::Tensor init = alpha_rows(op.initial_relaxation_params(pre), n);
      at::Tensor alpha = init + spread * at::randn(init.sizes(), init.options());
      op.project_relaxation_params(alpha, pre);
      expect_bounds_f(g, pre, lines_of(op, pre, alpha_params(alpha[0], alpha[1])), c.intervals,
                      c.op + " spread " + std::to_string(spread));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, Relaxation,
    ::testing::Values(OpIntervals{"Sigmoid", kSShapedIntervals},
                      OpIntervals{"Tanh", kSShapedIntervals}, OpIntervals{"Exp", kExpIntervals},
                      OpIntervals{"Reciprocal", kReciprocalIntervals},
                      OpIntervals{"Pow", kEvenPowIntervals, 2},
                      OpIntervals{"Pow", kEvenPowIntervals, 4},
                      OpIntervals{"Pow", kOddPowIntervals, 3},
                      OpIntervals{"Pow", kOddPowIntervals, 5}, OpIntervals{"Sqrt", kSqrtIntervals},
                      OpIntervals{"Erf", kSShapedIntervals}, OpIntervals{"Sin", kTrigIntervals},
                      OpIntervals{"Cos", kTrigIntervals}, OpIntervals{"Gelu", kGeluIntervals}),
    [](const ::testing::TestParamInfo<OpIntervals>& i) { return i.param.name(); });

// Sin / Cos IBP is the true minimum and maximum over each interval: within 1e-6 of those of
// 200001 evenly spaced points (5e-6·width apart, so they miss an extremum's value by at most
// 3e-12·width², < 2e-9 here), never inside them. An IBP taking only f(l) and f(u) fails on every
// interval that holds an extremum ([1, 2] holds sin's maximum π/2: max(sin 1, sin 2) = 0.909).
TEST(TrigIbp, ExactMinimumAndMaximumOverEachInterval) {
  c10::NoGradGuard no_grad;
  for (const std::string op : {"Sin", "Cos"}) {
    const Interval pre = edge_intervals(kTrigIntervals, at::kDouble);
    const int64_t n = pre.lower.size(1);
    BoundGraph g = one_op_graph(op, n);
    g.to_dtype(at::kDouble);
    const Interval* in[] = {&pre};
    const Interval y = g.node(1).op->ibp(in);
    const at::Tensor t = at::linspace(0, 1, 200001, at::kDouble).unsqueeze(1);
    const at::Tensor x = at::minimum(pre.lower + (pre.upper - pre.lower) * t, pre.upper);
    const at::Tensor fx = g.forward(x);  // [200001, n]
    const at::Tensor lo = std::get<0>(fx.min(0));
    const at::Tensor hi = std::get<0>(fx.max(0));
    for (int64_t j = 0; j < n; ++j) {
      const auto [l, u] = kTrigIntervals[size_t(j)];
      EXPECT_LE(y.lower[0][j].item<double>(), lo[j].item<double>() + 1e-12)
          << op << " lower [" << l << ", " << u << "]";
      EXPECT_GE(y.upper[0][j].item<double>(), hi[j].item<double>() - 1e-12)
          << op << " upper [" << l << ", " << u << "]";
      EXPECT_NEAR(y.lower[0][j].item<double>(), lo[j].item<double>(), 1e-6)
          << op << " lower not exact on [" << l << ", " << u << "]";
      EXPECT_NEAR(y.upper[0][j].item<double>(), hi[j].item<double>(), 1e-6)
          << op << " upper not exact on [" << l << ", " << u << "]";
    }
  }
  // Named cases: sin on [1, 2] reaches 1 at π/2, on [4, 5] −1 at 3π/2; cos on [−0.5, 0.5]
  // reaches 1 at 0, on [2.5, 3.8] −1 at π; a period or more gives [−1, 1].
  const auto ibp_of = [](const std::string& op, double l, double u) {
    const BoundGraph g = one_op_graph(op, 1);
    const Interval pre{at::tensor({l}, at::kDouble).reshape({1, 1}),
                       at::tensor({u}, at::kDouble).reshape({1, 1})};
    const Interval* in[] = {&pre};
    const Interval y = g.node(1).op->ibp(in);
    return std::pair{y.lower.item<double>(), y.upper.item<double>()};
  };
  EXPECT_EQ(ibp_of("Sin", 1, 2).second, 1.0);
  EXPECT_EQ(ibp_of("Sin", 4, 5).first, -1.0);
  EXPECT_EQ(ibp_of("Cos", -0.5, 0.5).second, 1.0);
  EXPECT_EQ(ibp_of("Cos", 2.5, 3.8).first, -1.0);
  EXPECT_EQ(ibp_of("Sin", -20, 1), std::pair(-1.0, 1.0));
  EXPECT_EQ(ibp_of("Cos", 100, 107), std::pair(-1.0, 1.0));
}

// Reciprocal is defined here for positive inputs only: an interval reaching 0 is an error, never
// a bound.
TEST(ReciprocalDomain, IntervalReachingZeroIsANumericError) {
  c10::NoGradGuard no_grad;
  const BoundGraph g = one_op_graph("Reciprocal", 2);
  const Interval pre{at::tensor({0.5, -0.1}).reshape({1, 2}),
                     at::tensor({1.0, 0.3}).reshape({1, 2})};
  const Interval* in[] = {&pre};
  EXPECT_THROW((void)g.node(1).op->ibp(in), NumericError);
  EXPECT_THROW((void)lines_of(*g.node(1).op, pre, {}), NumericError);
}

// Sqrt likewise for inputs below 0 (0 itself is in its domain).
TEST(SqrtDomain, IntervalReachingBelowZeroIsANumericError) {
  c10::NoGradGuard no_grad;
  const BoundGraph g = one_op_graph("Sqrt", 2);
  const Interval pre{at::tensor({0.0, -0.1}).reshape({1, 2}),
                     at::tensor({1.0, 0.3}).reshape({1, 2})};
  const Interval* in[] = {&pre};
  EXPECT_THROW((void)g.node(1).op->ibp(in), NumericError);
  EXPECT_THROW((void)lines_of(*g.node(1).op, pre, {}), NumericError);
}

// Pow lowers by its exponent: 1 is the input itself, 0.5 is Sqrt, integers ≥ 2 are Pow, and any
// other exponent (or a variable one) is a one-line UnsupportedError.
TEST(PowExponent, LowersByExponentOrFailsCleanly) {
  EXPECT_EQ(one_op_graph("Pow", 3, 1.0).size(), 1);
  EXPECT_EQ(one_op_graph("Pow", 3, 0.5).node(1).op->op_type(), "Sqrt");
  EXPECT_EQ(one_op_graph("Pow", 3, 2.0).node(1).op->op_type(), "Pow");
  for (const double e : {-1.0, 1.5, 0.25}) {
    EXPECT_THROW((void)one_op_graph("Pow", 3, e), UnsupportedError) << e;
  }
}

// Known floors: x² ≥ 0, so x² + ε ≥ ε and √(x² + ε) ≥ √ε for every input. Sqrt and Reciprocal
// lowered after them clamp intermediate bounds that reach below (CROWN's, not intersected with
// IBP) instead of failing; without such a fact the interval stays an error (above).
TEST(KnownFloor, SqrtAndReciprocalClampBoundsBelowAKnownFloor) {
  c10::NoGradGuard no_grad;
  testing::OnnxBuilder b;
  b.input("x", {1, 2}).output("y", {1, 2});
  b.initializer("two", at::tensor(2.0F)).initializer("eps", at::tensor(0.01F));
  b.node("square", "Pow", {"x", "two"}, {"sq"});
  b.node("plus_eps", "Add", {"sq", "eps"}, {"v"});
  b.node("std", "Sqrt", {"v"}, {"s"});
  b.node("inv", "Reciprocal", {"s"}, {"y"});
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "floors.onnx");
  ASSERT_EQ(g.size(), 5);
  const Interval below{at::tensor({-1.0F, 0.5F}).reshape({1, 2}),
                       at::tensor({1.0F, 2.0F}).reshape({1, 2})};
  const Interval* in[] = {&below};
  const Interval s = g.node(3).op->ibp(in);  // √ of [−1, 1] ∪ clamped at 0.01
  EXPECT_NEAR(s.lower[0][0].item<double>(), 0.1, 1e-6);
  EXPECT_NEAR(s.lower[0][1].item<double>(), std::sqrt(0.5), 1e-6);
  const Interval r = g.node(4).op->ibp(in);  // 1/· of [−1, 1] clamped at √0.01 = 0.1
  EXPECT_NEAR(r.upper[0][0].item<double>(), 10.0, 1e-4);
  EXPECT_NEAR(r.lower[0][1].item<double>(), 0.5, 1e-6);
  // The lines CROWN takes hold on the part of each interval above the floor.
  for (const int i : {3, 4}) {
    const Interval* pre = i == 3 ? &below : &s;
    const Lines l = lines_of(*g.node(i).op, *pre, {});
    const double floor = i == 3 ? 0.01 : 0.1;
    for (int64_t j = 0; j < 2; ++j) {
      const double lo = std::max(pre->lower[0][j].item<double>(), floor);
      const at::Tensor x = at::linspace(lo, pre->upper[0][j].item<double>(), 501, at::kDouble);
      const at::Tensor y = i == 3 ? at::sqrt(x) : 1.0 / x;
      const auto line = [&](const at::Tensor& k, const at::Tensor& c) {
        return k[j].item<double>() * x + c[j].item<double>();
      };
      EXPECT_LE((line(l.lower_k, l.lower_b) - y).max().item<double>(), 1e-5) << i << " " << j;
      EXPECT_LE((y - line(l.upper_k, l.upper_b)).max().item<double>(), 1e-5) << i << " " << j;
    }
  }
}

// LayerNormalization lowers into mean, x − mean, square, mean, + ε, √, 1/·, product, scale and
// bias: the lowered graph computes LayerNorm itself (axis 2 of [1, 2, 3, 4], so over [3, 4]), as
// does the decomposed form torch.onnx exports before opset 17.
TEST(LayerNorm, LoweredGraphComputesLayerNorm) {
  c10::NoGradGuard no_grad;
  at::manual_seed(3);
  const at::Tensor gamma = at::randn({3, 4});
  const at::Tensor beta = at::randn({3, 4});
  const at::Tensor x = at::randn({5, 2, 3, 4}) * 3 + 1;
  const at::Tensor want = at::layer_norm(x, {3, 4}, gamma, beta, 1e-5);
  for (const bool decomposed : {false, true}) {
    testing::OnnxBuilder b;
    b.model().opset = decomposed ? 13 : 17;
    b.input("x", {1, 2, 3, 4}).output("y", {1, 2, 3, 4});
    b.initializer("gamma", gamma).initializer("beta", beta);
    if (decomposed) {
      b.initializer("two", at::tensor(2.0F)).initializer("eps", at::tensor(1e-5F));
      b.node("mean", "ReduceMean", {"x"}, {"m"}, {testing::attr_ints("axes", {2, 3})});
      b.node("centre", "Sub", {"x", "m"}, {"c"});
      b.node("square", "Pow", {"c", "two"}, {"sq"});
      b.node("var", "ReduceMean", {"sq"}, {"v"}, {testing::attr_ints("axes", {-2, -1})});
      b.node("plus_eps", "Add", {"v", "eps"}, {"ve"});
      b.node("std", "Sqrt", {"ve"}, {"s"});
      b.node("divide", "Div", {"c", "s"}, {"n"});
      b.node("scale", "Mul", {"n", "gamma"}, {"ns"});
      b.node("shift", "Add", {"ns", "beta"}, {"y"});
    } else {
      b.node("ln", "LayerNormalization", {"x", "gamma", "beta"}, {"y"},
             {testing::attr_int("axis", 2), testing::attr_float("epsilon", 1e-5)});
    }
    const BoundGraph g = io::load_onnx_bytes(b.bytes(), "ln.onnx");
    EXPECT_TRUE(at::allclose(g.forward(x), want, 1e-4, 1e-5)) << "decomposed " << decomposed;
  }
}

// Gelu (opset 20) lowers into Erf (or Tanh and a cube), sums and a product: the lowered graph
// computes GELU itself.
TEST(Gelu, LoweredGraphComputesGelu) {
  c10::NoGradGuard no_grad;
  at::manual_seed(5);
  const at::Tensor x = at::randn({7, 5}) * 3;
  for (const std::string approximate : {"none", "tanh"}) {
    testing::OnnxBuilder b;
    b.model().opset = 20;
    b.input("x", {1, 5}).output("y", {1, 5});
    b.node("gelu", "Gelu", {"x"}, {"y"}, {testing::attr_string("approximate", approximate)});
    const BoundGraph g = io::load_onnx_bytes(b.bytes(), "gelu.onnx");
    EXPECT_TRUE(at::allclose(g.forward(x), at::gelu(x, approximate), 1e-5, 1e-6)) << approximate;
  }
}

}  // namespace
}  // namespace distcrown
