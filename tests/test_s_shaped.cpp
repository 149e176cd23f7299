// Sigmoid and Tanh relaxations (ops/s_shaped.cpp) on the edges: every linear bound the operator
// hands to CROWN (its own choice, and any tangent points α-CROWN may reach after projection) lies
// below resp. above f on the whole interval — zero-width intervals, intervals straddling the
// inflection point, one-sided and saturated ones, and intervals beyond the tangent table (|bound|
// > 500, where auto_LiRPA's fallback tangent is not sound) — in float32 and float64.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "onnx_builder.hpp"

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/onnx_loader.hpp"

namespace distcrown {
namespace {

// Pre-activation intervals [l, u], one per neuron.
const std::vector<std::pair<double, double>> kIntervals = {
    {-3, -3},  {0, 0},        {2, 2},          {40, 40},     {-1, 1},     {-0.3, 2},
    {-4, 0.5}, {-1e-7, 1e-7}, {-0.001, 0.002}, {-5, -0.1},   {0.1, 5},    {-5, 0},
    {0, 5},    {-20, 20},     {-100, 3},       {-0.1, 600},  {-600, 0.1}, {-700, 700},
    {30, 40},  {-40, -30},    {15, 60},        {-2.5, 1e-3}, {-1e-3, 2.5}};

// x [1, n] -> op -> y: the op is node 1.
BoundGraph one_op_graph(const std::string& op_type, int64_t n) {
  testing::OnnxBuilder b;
  b.input("x", {1, n}).output("y", {1, n});
  b.node("op", op_type, {"x"}, {"y"});
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
                     const std::string& what) {
  const auto type = pre.lower.scalar_type();
  const at::Tensor t = at::linspace(0, 1, 2001, at::TensorOptions().dtype(type)).unsqueeze(1);
  const at::Tensor x = at::minimum(pre.lower + (pre.upper - pre.lower) * t, pre.upper);  // [S, n]
  const at::Tensor y = g.forward(x).to(at::kDouble);
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor lo = l.lower_k.to(at::kDouble) * xd + l.lower_b.to(at::kDouble);
  const at::Tensor hi = l.upper_k.to(at::kDouble) * xd + l.upper_b.to(at::kDouble);
  const at::Tensor scale = at::maximum(at::maximum(lo.abs(), hi.abs()), y.abs()).clamp_min(1.0);
  const at::Tensor tol = 16 * eps_of(type) * scale;
  for (int64_t j = 0; j < x.size(1); ++j) {
    const double over = (lo.select(1, j) - y.select(1, j) - tol.select(1, j)).max().item<double>();
    const double under = (y.select(1, j) - hi.select(1, j) - tol.select(1, j)).max().item<double>();
    EXPECT_LE(over, 0) << what << ": lower line above f on [" << kIntervals[size_t(j)].first << ", "
                       << kIntervals[size_t(j)].second << "]";
    EXPECT_LE(under, 0) << what << ": upper line below f on [" << kIntervals[size_t(j)].first
                        << ", " << kIntervals[size_t(j)].second << "]";
  }
}

Interval edge_intervals(at::ScalarType type) {
  std::vector<double> lo;
  std::vector<double> hi;
  for (const auto& [l, u] : kIntervals) {
    lo.push_back(l);
    hi.push_back(u);
  }
  const auto n = int64_t(lo.size());
  return {at::tensor(lo, at::kDouble).reshape({1, n}).to(type),
          at::tensor(hi, at::kDouble).reshape({1, n}).to(type)};
}

class SShaped : public ::testing::TestWithParam<std::string> {};

TEST_P(SShaped, CrownLinesBoundTheFunctionOnEveryEdgeInterval) {
  c10::NoGradGuard no_grad;
  for (const auto type : {at::kFloat, at::kDouble}) {
    const Interval pre = edge_intervals(type);
    BoundGraph g = one_op_graph(GetParam(), pre.lower.size(1));
    g.to_dtype(type);
    expect_bounds_f(g, pre, lines_of(*g.node(1).op, pre, {}),
                    GetParam() + (type == at::kFloat ? " f32" : " f64"));
  }
}

TEST_P(SShaped, InitialParametersGiveCrownsLines) {
  c10::NoGradGuard no_grad;
  const Interval pre = edge_intervals(at::kFloat);
  const int64_t n = pre.lower.size(1);
  const BoundGraph g = one_op_graph(GetParam(), n);
  const BoundNode& op = *g.node(1).op;
  ASSERT_TRUE(op.traits().relaxation_params);
  const at::Tensor init = op.initial_relaxation_params(pre);  // [4, 1, n]
  at::Tensor alpha = init.unsqueeze(0).unsqueeze(0).expand({2, n, 4, 1, n}).clone();
  op.project_relaxation_params(alpha, pre);
  const Lines crown = lines_of(op, pre, {});
  const Lines with_init = lines_of(op, pre, {alpha[0], alpha[1], {}, {}});
  // Equal up to rounding: the per-row tensors take other vectorised paths through tanh.
  const auto same = [](const at::Tensor& a, const at::Tensor& b) {
    return at::allclose(a, b, 1e-6, 1e-7);
  };
  EXPECT_TRUE(same(crown.lower_k, with_init.lower_k));
  EXPECT_TRUE(same(crown.lower_b, with_init.lower_b));
  EXPECT_TRUE(same(crown.upper_k, with_init.upper_k));
  EXPECT_TRUE(same(crown.upper_b, with_init.upper_b));
}

// Whatever values the optimiser gives the tangent points, projection keeps every line sound.
TEST_P(SShaped, ProjectedTangentPointsStaySound) {
  c10::NoGradGuard no_grad;
  at::manual_seed(7);
  for (const auto type : {at::kFloat, at::kDouble}) {
    const Interval pre = edge_intervals(type);
    const int64_t n = pre.lower.size(1);
    BoundGraph g = one_op_graph(GetParam(), n);
    g.to_dtype(type);
    const BoundNode& op = *g.node(1).op;
    for (const double spread : {0.1, 3.0, 1e3}) {
      at::Tensor alpha =
          op.initial_relaxation_params(pre).unsqueeze(0).unsqueeze(0).expand({2, n, 4, 1, n}) +
          spread * at::randn({2, n, 4, 1, n}, at::TensorOptions().dtype(type));
      op.project_relaxation_params(alpha, pre);
      expect_bounds_f(g, pre, lines_of(op, pre, {alpha[0], alpha[1], {}, {}}),
                      GetParam() + " spread " + std::to_string(spread));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, SShaped, ::testing::Values("Sigmoid", "Tanh"));

}  // namespace
}  // namespace distcrown
