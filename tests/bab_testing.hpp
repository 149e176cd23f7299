#pragma once
// What the branch-and-bound tests share (test_relu_bounding.cpp, test_relu_bab.cpp,
// test_input_bab.cpp, test_attack.cpp, test_objective.cpp, test_verifier.cpp, test_crown.cpp):
// MLPs with explicit weights and a by-hand forward pass, sampling, small properties and the
// hard property that α-CROWN leaves open.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "bab/input_bab.hpp"
#include "bab/relu_bab.hpp"
#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/graph/param.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/methods/relaxation_hook.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "ops/linear.hpp"
#include "ops/relu.hpp"
#include "process.hpp"
#include "sampling.hpp"

namespace distcrown::bab_testing {

using testing::fmt;

inline constexpr double kTol = 1e-5;  // relative to max(1, |value|)

// β-CROWN's lower bound of one domain (bab::split_domain_lower_bound) after `iterations` α/β
// steps.
inline at::Tensor lower_bound_with_splits(const BoundGraph& g, const InputBox& box,
                                          const at::Tensor& C,
                                          const std::vector<bab::Split>& splits, int iterations,
                                          bab::BabOptions options = {}) {
  options.iterations = iterations;
  return bab::split_domain_lower_bound(options, g, box, C, splits);
}

inline bab::RunContext context_of(const bab::Deadline& deadline) {
  bab::RunContext context;
  context.deadline = deadline;
  return context;
}

// ---------------------------------------------------------------------------------------------
// MLPs with explicit weights: the same weights give the graph and a by-hand forward pass.

struct Layer {
  at::Tensor W;  // [out, in], float64
  at::Tensor b;  // [out]
};

// widths = {in, hidden..., out}; PyTorch's default init U(−1/√fan_in, 1/√fan_in).
inline std::vector<Layer> random_layers(const std::vector<int64_t>& widths, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  std::vector<Layer> layers;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const double k = 1.0 / std::sqrt(double(widths[i]));
    // Values representable in float32: the by-hand float64 pass uses the graph's weights.
    const auto f32 = [](const at::Tensor& t) { return t.to(at::kFloat).to(at::kDouble); };
    layers.push_back({f32(at::rand({widths[i + 1], widths[i]}, gen, opts) * 2 * k - k),
                      f32(at::rand({widths[i + 1]}, gen, opts) * 2 * k - k)});
  }
  return layers;
}

struct Net {
  BoundGraph graph;
  std::vector<int> relus;  // graph index of each ReLU, in layer order
  std::vector<int> pres;   // its input (the pre-activation)
};

// Linear -> ReLU for every layer but the last, then Linear; parameters in `dtype`.
inline Net build(const std::vector<Layer>& layers, at::ScalarType dtype = at::kFloat) {
  GraphBuilder b({1, layers.front().W.size(1)});
  int x = b.input();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    x = b.add("fc" + std::to_string(i),
              ops::make_linear(make_param(l.W.to(at::kFloat)), make_param(l.b.to(at::kFloat))),
              {x});
    if (i + 1 < layers.size()) x = b.add("relu" + std::to_string(i), ops::make_relu(), {x});
  }
  Net n{std::move(b).finish(x), {}, {}};
  n.graph.to_dtype(dtype);
  for (int i = 1; i < n.graph.size(); ++i) {
    if (n.graph.node(i).op && n.graph.node(i).op->traits().splittable) {
      n.relus.push_back(i);
      n.pres.push_back(n.graph.node(i).inputs.at(0));
    }
  }
  return n;
}

// Pre-activations of every hidden layer at x [N, in] (float64, by hand): [N, width] each.
inline std::vector<at::Tensor> pre_activations(const std::vector<Layer>& layers,
                                               const at::Tensor& x) {
  std::vector<at::Tensor> z;
  at::Tensor h = x.to(at::kDouble).reshape({x.size(0), -1});
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    z.push_back(at::matmul(h, layers[i].W.t()) + layers[i].b);
    h = at::relu(z.back());
  }
  return z;
}

inline at::Tensor uniform_points(at::Generator& gen, const InputBox& box, int64_t n) {
  const at::Tensor u =
      at::rand({n, box.lower.size(1)}, gen, at::TensorOptions().dtype(box.lower.scalar_type()));
  return at::minimum(at::maximum(box.lower + (box.upper - box.lower) * u, box.lower), box.upper);
}

// C·y at x: [N, K], float64.
inline at::Tensor spec_outputs(const BoundGraph& g, const at::Tensor& x, const at::Tensor& C) {
  c10::NoGradGuard no_grad;
  const at::Tensor y = g.forward(x.to(g.dtype())).reshape({x.size(0), -1}).to(at::kDouble);
  return at::matmul(y, C.to(at::kDouble).t());
}

// Every row of v [N, K] ≥ lower ([1, K]) − kTol·max(1, |v|).
inline void expect_above(const at::Tensor& lower, const at::Tensor& v, const std::string& what) {
  ASSERT_GT(v.size(0), 0) << what << ": no samples";
  const at::Tensor l = lower.to(at::kDouble).reshape({1, -1});
  const at::Tensor excess = (l - v) - v.abs().clamp_min(1.0) * kTol;
  const int64_t worst = excess.reshape({-1}).argmax().item<int64_t>();
  EXPECT_LE(excess.reshape({-1})[worst].item<double>(), 0.0)
      << what << ": sample " << worst / v.size(1) << " row " << worst % v.size(1) << " value "
      << fmt(v.reshape({-1})[worst].item<double>()) << " below the bound "
      << fmt(l.reshape({-1})[worst % v.size(1)].item<double>()) << " ("
      << (excess > 0).sum().item<int64_t>() << " of " << v.numel() << ")";
}

// a ≥ b − kTol·max(1, |b|) elementwise (a never looser), or equal when `equal`.
inline void expect_bounds(const at::Tensor& a, const at::Tensor& b, bool equal,
                          const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const at::Tensor ad = a.to(at::kDouble);
  const at::Tensor bd = b.to(at::kDouble);
  const at::Tensor slack = bd.abs().clamp_min(1.0) * kTol;
  const at::Tensor excess = equal ? (ad - bd).abs() - slack : (bd - ad) - slack;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": got " << ad << "\nreference " << bd;
}

// [1, n] tensor of the values.
inline at::Tensor row(const std::vector<double>& v, at::ScalarType t = at::kFloat) {
  return at::tensor(v, at::kDouble).to(t).reshape({1, -1});
}

inline std::vector<double> as_vector(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

inline InputBox box_around(at::Generator& gen, int64_t in, double radius) {
  const at::Tensor c = at::randn({1, in}, gen, at::TensorOptions().dtype(at::kDouble));
  return {(c - radius).to(at::kFloat), (c + radius).to(at::kFloat)};
}

// Neurons of a pre-activation [1, n] unstable under the given bounds, ordered by how evenly the
// samples z [N, n] fall on both sides (most even first); at most `count`.
inline std::vector<int64_t> unstable_neurons(const Interval& b, const at::Tensor& z, size_t count) {
  const at::Tensor l = b.lower.reshape({-1}).to(at::kDouble);
  const at::Tensor u = b.upper.reshape({-1}).to(at::kDouble);
  const at::Tensor neg = (z <= 0).sum(0).to(at::kDouble);
  const at::Tensor pos = (z >= 0).sum(0).to(at::kDouble);
  const at::Tensor balance = at::minimum(neg, pos);
  std::vector<std::pair<double, int64_t>> order;
  for (int64_t j = 0; j < l.numel(); ++j) {
    if (l[j].item<double>() < 0 && u[j].item<double>() > 0) {
      order.emplace_back(-balance[j].item<double>(), j);
    }
  }
  std::sort(order.begin(), order.end());
  std::vector<int64_t> out;
  for (size_t i = 0; i < std::min(count, order.size()); ++i) out.push_back(order[i].second);
  return out;
}

inline io::VnnlibCase case_of(const InputBox& box, std::vector<io::OutputConjunction> disjuncts) {
  io::VnnlibCase c;
  c.input_lower = as_vector(box.lower);
  c.input_upper = as_vector(box.upper);
  c.disjuncts = std::move(disjuncts);
  return c;
}

inline std::vector<bab::Objective> objectives(const io::VnnlibCase& c, int64_t n_out,
                                              at::ScalarType t = at::kFloat) {
  std::vector<bab::Objective> o;
  for (const auto& d : c.disjuncts) o.push_back(bab::make_objective(d, n_out, t));
  return o;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline io::VnnlibProperty property_of(const InputBox& box, int64_t n_out,
                                      std::vector<io::OutputConjunction> disjuncts) {
  io::VnnlibProperty p;
  p.source = "<test>";
  p.num_inputs = box.lower.numel();
  p.num_outputs = n_out;
  p.cases.push_back(case_of(box, std::move(disjuncts)));
  return p;
}

inline bool inside(const std::vector<double>& x, const io::VnnlibCase& c) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] >= c.input_lower[i] && x[i] <= c.input_upper[i])) return false;
  }
  return x.size() == c.input_lower.size();
}

inline std::string status(const bab::BabResult& r) {
  switch (r.status) {
    case bab::BabStatus::kProved:
      return "proved";
    case bab::BabStatus::kFalsified:
      return "falsified";
    case bab::BabStatus::kTimeout:
      return "timeout";
    case bab::BabStatus::kUnknown:
      return "unknown";
  }
  return "?";
}

// Minimum of Y_0 over the box, estimated from above: dense samples, then sign-gradient descent
// from the best of them.
inline double sampled_min(const BoundGraph& g, const InputBox& box, at::Generator& gen, int64_t n) {
  at::Tensor x = uniform_points(gen, box, n);
  at::Tensor y;
  {
    c10::NoGradGuard no_grad;
    y = g.forward(x).select(1, 0);
  }
  const at::Tensor top = std::get<1>(y.topk(std::min<int64_t>(64, n), 0, false));
  x = x.index_select(0, top);
  const at::Tensor width = box.upper - box.lower;
  double best = y.min().item<double>();
  for (int step = 0; step < 100; ++step) {
    const at::Tensor xv = x.detach().requires_grad_(true);
    c10::AutoGradMode grad(true);
    const at::Tensor v = g.forward(xv).select(1, 0);
    best = std::min(best, v.min().item<double>());
    v.sum().backward();
    c10::NoGradGuard no_grad;
    x = at::minimum(
        at::maximum(x - 0.02 * (1.0 - step / 100.0) * width * xv.grad().sign(), box.lower),
        box.upper);
  }
  return best;
}

// Y_0 ≤ rhs unsafe over `box` ([1, n]), rhs a `fraction` of the way from α-CROWN's lower bound
// (as verify() runs it at the root) to the sampled minimum: true, and open after α-CROWN.
struct OpenProperty {
  double alpha_lower = 0, minimum = 0, rhs = 0;
  io::VnnlibProperty property;
};

inline OpenProperty open_property(const BoundGraph& g, const InputBox& box, at::Generator& gen,
                                  double fraction) {
  OpenProperty o;
  AlphaOptions ao;
  o.alpha_lower =
      alpha_crown(ao.sided(BoundSides::kLower), {}, g, box, at::eye(1)).bounds.lower.item<double>();
  o.minimum = sampled_min(g, box, gen, 20000);
  o.rhs = o.alpha_lower + fraction * (o.minimum - o.alpha_lower);
  o.property = property_of(box, 1, {{{{{1.0}, o.rhs}}}});
  return o;
}

// A true property that α-CROWN cannot prove at the root: Y_0 ≤ rhs unsafe with rhs between the
// α-CROWN lower bound and the sampled minimum.
struct HardProperty {
  Net net;
  InputBox box;
  double alpha_lower = 0, minimum = 0, rhs = 0;
  io::VnnlibProperty property;
};

inline HardProperty hard_property(double fraction) {
  const std::vector<Layer> layers = random_layers({5, 20, 20, 1}, 12);
  HardProperty h{build(layers), {}, 0, 0, 0, {}};
  at::Generator gen = at::detail::createCPUGenerator(12);
  h.box = box_around(gen, 5, 0.5);
  OpenProperty o = open_property(h.net.graph, h.box, gen, fraction);
  h.alpha_lower = o.alpha_lower;
  h.minimum = o.minimum;
  h.rhs = o.rhs;
  h.property = std::move(o.property);
  return h;
}

}  // namespace distcrown::bab_testing
