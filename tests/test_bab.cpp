// Branch and bound (bab/*.hpp): β-CROWN split constraints against a network with the neuron
// removed and against sampled inputs that satisfy the splits, the concrete counterexample check
// and the VNN-COMP result text, verify() on trivially true and false properties, timeouts (library
// and CLI, on a fixture instance nobody decides), counterexamples checked against the constraint
// as written (not its float32 rounding), ReLU-split BaB that needs rounds to prove a true
// property, input-split BaB where CROWN alone fails, and deterministic runs.
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

#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/input_bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/bab/relu_bab.hpp"
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
#include "distcrown/ops/linear.hpp"
#include "distcrown/ops/relu.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "process.hpp"
#include "sampling.hpp"

namespace distcrown {
namespace {

using testing::fmt;

constexpr double kTol = 1e-5;  // relative to max(1, |value|)

// ---------------------------------------------------------------------------------------------
// MLPs with explicit weights: the same weights give the graph and a by-hand forward pass.

struct Layer {
  at::Tensor W;  // [out, in], float64
  at::Tensor b;  // [out]
};

// widths = {in, hidden..., out}; PyTorch's default init U(−1/√fan_in, 1/√fan_in).
std::vector<Layer> random_layers(const std::vector<int64_t>& widths, uint64_t seed) {
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
Net build(const std::vector<Layer>& layers, at::ScalarType dtype = at::kFloat) {
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
std::vector<at::Tensor> pre_activations(const std::vector<Layer>& layers, const at::Tensor& x) {
  std::vector<at::Tensor> z;
  at::Tensor h = x.to(at::kDouble).reshape({x.size(0), -1});
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    z.push_back(at::matmul(h, layers[i].W.t()) + layers[i].b);
    h = at::relu(z.back());
  }
  return z;
}

at::Tensor uniform_points(at::Generator& gen, const InputBox& box, int64_t n) {
  const at::Tensor u =
      at::rand({n, box.lower.size(1)}, gen, at::TensorOptions().dtype(box.lower.scalar_type()));
  return at::minimum(at::maximum(box.lower + (box.upper - box.lower) * u, box.lower), box.upper);
}

// C·y at x: [N, K], float64.
at::Tensor spec_outputs(const BoundGraph& g, const at::Tensor& x, const at::Tensor& C) {
  c10::NoGradGuard no_grad;
  const at::Tensor y = g.forward(x.to(g.dtype())).reshape({x.size(0), -1}).to(at::kDouble);
  return at::matmul(y, C.to(at::kDouble).t());
}

// Every row of v [N, K] ≥ lower ([1, K]) − kTol·max(1, |v|).
void expect_above(const at::Tensor& lower, const at::Tensor& v, const std::string& what) {
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
void expect_bounds(const at::Tensor& a, const at::Tensor& b, bool equal, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const at::Tensor ad = a.to(at::kDouble);
  const at::Tensor bd = b.to(at::kDouble);
  const at::Tensor slack = bd.abs().clamp_min(1.0) * kTol;
  const at::Tensor excess = equal ? (ad - bd).abs() - slack : (bd - ad) - slack;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": got " << ad << "\nreference " << bd;
}

// [1, n] tensor of the values.
at::Tensor row(const std::vector<double>& v, at::ScalarType t = at::kFloat) {
  return at::tensor(v, at::kDouble).to(t).reshape({1, -1});
}

std::vector<double> as_vector(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

InputBox box_around(at::Generator& gen, int64_t in, double radius) {
  const at::Tensor c = at::randn({1, in}, gen, at::TensorOptions().dtype(at::kDouble));
  return {(c - radius).to(at::kFloat), (c + radius).to(at::kFloat)};
}

// Neurons of a pre-activation [1, n] unstable under the given bounds, ordered by how evenly the
// samples z [N, n] fall on both sides (most even first); at most `count`.
std::vector<int64_t> unstable_neurons(const Interval& b, const at::Tensor& z, size_t count) {
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

// ---------------------------------------------------------------------------------------------
// β-CROWN split constraints.

TEST(BetaSplit, InactiveSplitOnLastLayerEqualsTheNeuronRemoved) {
  // z_j ≤ 0 on the last ReLU layer: the intermediate bounds of every ReLU input are those of the
  // unsplit network (nothing after the split neuron is a ReLU input), and the neuron outputs 0,
  // which is what the network with column j of the next weight zeroed computes.
  for (const at::ScalarType t : {at::kFloat, at::kDouble}) {
    for (const uint64_t seed : {7, 8}) {
      const std::string what =
          std::string(t == at::kFloat ? "f32" : "f64") + " seed " + std::to_string(seed);
      const std::vector<Layer> layers = random_layers({5, 16, 16, 16, 3}, seed);
      const Net net = build(layers, t);
      ASSERT_EQ(net.relus.size(), 3u);
      at::Generator gen = at::detail::createCPUGenerator(seed + 100);
      const InputBox box0 = box_around(gen, 5, 1.0);
      const InputBox box{box0.lower.to(t), box0.upper.to(t)};
      const at::Tensor C = at::randn({4, 3}, gen, at::TensorOptions().dtype(t));
      CrownEngine engine(net.graph, box, {});
      engine.compute_intermediate_bounds();
      const at::Tensor x = uniform_points(gen, box, 4000);
      const at::Tensor z = pre_activations(layers, x).back();
      const auto js = unstable_neurons(engine.bounds(net.pres.back()), z, 3);
      ASSERT_FALSE(js.empty()) << what << ": no unstable neuron in the last ReLU layer";
      const at::Tensor y = spec_outputs(net.graph, x, C);
      for (const int64_t j : js) {
        SCOPED_TRACE(what + " neuron " + std::to_string(j));
        const std::vector<bab::NeuronSplit> split{{net.relus.back(), j, false}};
        const at::Tensor split0 = bab::split_domain_lower_bound(net.graph, box, C, split, 0);
        std::vector<Layer> removed = layers;
        removed.back().W = layers.back().W.clone();
        removed.back().W.select(1, j).zero_();
        const Net net2 = build(removed, t);
        const at::Tensor crown2 = compute_bounds(net2.graph, box, Method::kCrown, {}, C).lower;
        expect_bounds(split0, crown2, true, "split z_j <= 0 vs neuron removed");

        const at::Tensor split20 = bab::split_domain_lower_bound(net.graph, box, C, split, 20);
        expect_bounds(split20, split0, false, "beta-optimised vs 0 iterations");
        const at::Tensor in = (z.select(1, j) <= 0).nonzero().reshape({-1});
        ASSERT_GT(in.numel(), 20) << "samples with z_j <= 0";
        expect_above(split0, y.index_select(0, in), "0 iterations, samples with z_j <= 0");
        expect_above(split20, y.index_select(0, in), "20 iterations, samples with z_j <= 0");

        const std::vector<bab::NeuronSplit> active{{net.relus.back(), j, true}};
        const at::Tensor act0 = bab::split_domain_lower_bound(net.graph, box, C, active, 0);
        const at::Tensor act20 = bab::split_domain_lower_bound(net.graph, box, C, active, 20);
        expect_bounds(act20, act0, false, "active: beta-optimised vs 0 iterations");
        const at::Tensor pos = (z.select(1, j) >= 0).nonzero().reshape({-1});
        ASSERT_GT(pos.numel(), 20) << "samples with z_j >= 0";
        expect_above(act0, y.index_select(0, pos), "active, 0 iterations, samples z_j >= 0");
        expect_above(act20, y.index_select(0, pos), "active, 20 iterations, samples z_j >= 0");
      }
    }
  }
}

TEST(BetaSplit, SplitsOnEarlierLayersAreSoundWhereTheyHold) {
  // A split on an early layer only acts on later layers through β (their intermediate bounds
  // stay those of the unsplit box): the bound must hold on the samples that satisfy every split,
  // with and without β optimisation, for both signs and for several splits at once.
  const std::vector<Layer> layers = random_layers({4, 20, 20, 12, 2}, 21);
  const Net net = build(layers);
  at::Generator gen = at::detail::createCPUGenerator(5);
  const InputBox box = box_around(gen, 4, 0.6);
  const at::Tensor C = at::randn({3, 2}, gen, at::TensorOptions().dtype(at::kFloat));
  CrownEngine engine(net.graph, box, {});
  engine.compute_intermediate_bounds();
  const at::Tensor x = uniform_points(gen, box, 20000);
  const std::vector<at::Tensor> z = pre_activations(layers, x);
  const at::Tensor y = spec_outputs(net.graph, x, C);
  const auto j0 = unstable_neurons(engine.bounds(net.pres[0]), z[0], 2);
  const auto j1 = unstable_neurons(engine.bounds(net.pres[1]), z[1], 1);
  ASSERT_EQ(j0.size(), 2u);
  ASSERT_EQ(j1.size(), 1u);
  const std::vector<std::vector<bab::NeuronSplit>> cases{
      {{net.relus[0], j0[0], false}},
      {{net.relus[0], j0[0], true}},
      {{net.relus[1], j1[0], false}},
      {{net.relus[1], j1[0], true}},
      {{net.relus[0], j0[0], false}, {net.relus[0], j0[1], true}},
      {{net.relus[0], j0[0], true}, {net.relus[1], j1[0], false}},
      {{net.relus[0], j0[1], false}, {net.relus[1], j1[0], true}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    std::string what = "splits";
    at::Tensor holds = at::ones({x.size(0)}, at::TensorOptions().dtype(at::kBool));
    for (const auto& s : cases[k]) {
      const size_t layer = s.relu_node == net.relus[0] ? 0 : 1;
      const at::Tensor zj = z[layer].select(1, s.neuron);
      holds = holds & (s.active ? zj >= 0 : zj <= 0);
      what +=
          " L" + std::to_string(layer) + "n" + std::to_string(s.neuron) + (s.active ? "+" : "-");
    }
    SCOPED_TRACE(what);
    const at::Tensor idx = holds.nonzero().reshape({-1});
    ASSERT_GT(idx.numel(), 20) << "too few samples satisfy the splits";
    const at::Tensor lb0 = bab::split_domain_lower_bound(net.graph, box, C, cases[k], 0);
    bab::BabOptions o;
    o.lr_beta = 0.5;  // large steps: β away from 0 quickly
    const at::Tensor lb30 = bab::split_domain_lower_bound(net.graph, box, C, cases[k], 30, o);
    ASSERT_EQ(lb0.sizes(), at::IntArrayRef({1, 3}));
    expect_bounds(lb30, lb0, false, "optimised vs 0 iterations");
    expect_above(lb0, y.index_select(0, idx), "0 iterations");
    expect_above(lb30, y.index_select(0, idx), "30 iterations");
  }
}

// Refreshed intermediate bounds (--bab-intermediate refresh): the bound of a split domain after
// the α/β steps stays sound on the samples where the splits hold, and the refresh acts (on a
// split before the last hidden layer, some bound differs from the fixed one's).
TEST(BetaSplit, RefreshedIntermediateBoundsAreSoundWhereTheSplitsHold) {
  const std::vector<Layer> layers = random_layers({4, 20, 20, 20, 2}, 23);
  const Net net = build(layers);
  at::Generator gen = at::detail::createCPUGenerator(6);
  const InputBox box = box_around(gen, 4, 0.6);
  const at::Tensor C = at::randn({3, 2}, gen, at::TensorOptions().dtype(at::kFloat));
  CrownEngine engine(net.graph, box, {});
  engine.compute_intermediate_bounds();
  const at::Tensor x = uniform_points(gen, box, 20000);
  const std::vector<at::Tensor> z = pre_activations(layers, x);
  const at::Tensor y = spec_outputs(net.graph, x, C);
  const auto j0 = unstable_neurons(engine.bounds(net.pres[0]), z[0], 2);
  const auto j1 = unstable_neurons(engine.bounds(net.pres[1]), z[1], 1);
  ASSERT_EQ(j0.size(), 2u);
  ASSERT_EQ(j1.size(), 1u);
  const std::vector<std::vector<bab::NeuronSplit>> cases{
      {{net.relus[0], j0[0], false}},
      {{net.relus[0], j0[0], true}},
      {{net.relus[0], j0[0], true}, {net.relus[0], j0[1], false}},
      {{net.relus[0], j0[1], true}, {net.relus[1], j1[0], false}},
      {{net.relus[1], j1[0], true}},
  };
  bab::BabOptions fixed;
  fixed.lr_beta = 0.5;
  bab::BabOptions refresh = fixed;
  refresh.intermediate = bab::BabIntermediate::kRefresh;
  int differ = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    at::Tensor holds = at::ones({x.size(0)}, at::TensorOptions().dtype(at::kBool));
    for (const auto& s : cases[k]) {
      const at::Tensor zj = z[s.relu_node == net.relus[0] ? 0 : 1].select(1, s.neuron);
      holds = holds & (s.active ? zj >= 0 : zj <= 0);
    }
    const at::Tensor idx = holds.nonzero().reshape({-1});
    ASSERT_GT(idx.numel(), 20) << "too few samples satisfy the splits";
    const at::Tensor lf = bab::split_domain_lower_bound(net.graph, box, C, cases[k], 20, fixed);
    const at::Tensor lr = bab::split_domain_lower_bound(net.graph, box, C, cases[k], 20, refresh);
    expect_above(lr, y.index_select(0, idx), "refreshed, 20 iterations");
    differ += int((lr - lf).abs().max().item<double>() > 1e-6);
  }
  EXPECT_GT(differ, 0) << "refreshing changed no bound: the refresh did not run";
}

// A hook that only observes, as input splitting's: passes may then give each element its rows.
class ObservingHook final : public RelaxationHook {
 public:
  RelaxParams params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                     std::span<const Interval* const> /*in*/) override {
    return {};
  }
  [[nodiscard]] bool reads_rows() const override { return false; }
};

// A batch of boxes (as branch and bound bounds batches of domains) whose unstable neurons
// differ: every element's intermediate bounds equal those of its box bounded alone (its own
// unstable neurons get CROWN rows, its stable ones keep their reference), not those of a pass
// over the union of the batch's unstable neurons. Under the default scheme and under
// tight_unstable (input splitting's), with no hook or one that only observes.
TEST(CrownBatch, EachElementBoundsItsOwnUnstableNeurons) {
  const std::vector<Layer> layers = random_layers({4, 40, 40, 40, 2}, 31);
  const Net net = build(layers, at::kDouble);
  at::Generator gen = at::detail::createCPUGenerator(8);
  std::vector<InputBox> boxes;
  std::vector<at::Tensor> lowers, uppers;
  for (int b = 0; b < 4; ++b) {
    const InputBox x = box_around(gen, 4, 0.1);
    boxes.push_back({x.lower.to(at::kDouble), x.upper.to(at::kDouble)});
    lowers.push_back(boxes.back().lower);
    uppers.push_back(boxes.back().upper);
  }
  for (const auto scheme : {IntermediateScheme::kAutoLirpa, IntermediateScheme::kTightUnstable}) {
    for (const bool hooked : {false, true}) {
      SCOPED_TRACE(std::string(enum_name(scheme)) + (hooked ? ", observing hook" : ""));
      BoundOptions o;
      o.scheme = scheme;
      ObservingHook hook;
      CrownEngine together(net.graph, {at::cat(lowers), at::cat(uppers)}, o);
      if (hooked) together.set_hook(&hook);
      together.compute_intermediate_bounds();
      int64_t unstable = 0;
      for (size_t b = 0; b < boxes.size(); ++b) {
        CrownEngine alone(net.graph, boxes[b], o);
        alone.compute_intermediate_bounds();
        for (size_t r = 0; r < net.pres.size(); ++r) {
          SCOPED_TRACE("box " + std::to_string(b) + ", layer " + std::to_string(r));
          const Interval& one = alone.bounds(net.pres[r]);
          const Interval& all = together.bounds(net.pres[r]);
          unstable += ((one.lower < 0) & (one.upper > 0)).sum().item<int64_t>();
          expect_bounds(all.lower.narrow(0, int64_t(b), 1), one.lower, true, "lower");
          expect_bounds(all.upper.narrow(0, int64_t(b), 1), one.upper, true, "upper");
        }
      }
      EXPECT_GT(unstable, 0) << "no unstable neuron: the comparison covers no CROWN row";
    }
  }
}

TEST(BetaSplit, RejectsSplitsThatAreNotReluNeurons) {
  const std::vector<Layer> layers = random_layers({3, 6, 6, 2}, 1);
  const Net net = build(layers);
  const InputBox box{at::zeros({1, 3}), at::ones({1, 3})};
  const at::Tensor C = at::eye(2);
  EXPECT_THROW(bab::split_domain_lower_bound(net.graph, box, C, {{net.pres[0], 0, false}}, 0),
               InvalidArgument);
  EXPECT_THROW(bab::split_domain_lower_bound(net.graph, box, C, {{net.relus[0], 6, false}}, 0),
               InvalidArgument);
  EXPECT_THROW(bab::split_domain_lower_bound(net.graph, box, C, {{net.relus[0], -1, false}}, 0),
               InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Counterexamples and result text.

io::VnnlibCase case_of(const InputBox& box, std::vector<io::OutputConjunction> disjuncts) {
  io::VnnlibCase c;
  c.input_lower = as_vector(box.lower);
  c.input_upper = as_vector(box.upper);
  c.disjuncts = std::move(disjuncts);
  return c;
}

std::vector<bab::Objective> objectives(const io::VnnlibCase& c, int64_t n_out,
                                       at::ScalarType t = at::kFloat) {
  std::vector<bab::Objective> o;
  for (const auto& d : c.disjuncts) o.push_back(bab::make_objective(d, n_out, t));
  return o;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

class CheckCandidates : public ::testing::Test {
 protected:
  void SetUp() override {
    // Box bounds exactly representable in float32: the clamped points lie in the box as written.
    box_ = {row({-0.5, -0.25, 0.0}), row({0.5, 0.75, 1.0})};
    c10::NoGradGuard no_grad;
    centre_ = (box_.lower + box_.upper) / 2;
    y_centre_ = as_vector(net_.graph.forward(centre_));
    const Interval ibp = ibp_bounds(net_.graph, box_, row({1.0, -1.0}));
    ibp_lower_ = ibp.lower.item<double>();
    ibp_upper_ = ibp.upper.item<double>();
  }

  const std::vector<Layer> layers_ = random_layers({3, 8, 8, 2}, 3);
  const Net net_ = build(layers_);
  InputBox box_;
  at::Tensor centre_;
  std::vector<double> y_centre_;
  double ibp_lower_ = 0, ibp_upper_ = 0;  // of Y_0 − Y_1
  const std::vector<double> c_{1.0, -1.0};
};

TEST_F(CheckCandidates, AcceptsAPointWhereADisjunctHolds) {
  const io::VnnlibCase c = case_of(box_, {{{{c_, dot(c_, y_centre_) + 1}}}});
  const auto cex = bab::check_candidates(net_.graph, c, centre_);
  ASSERT_TRUE(cex.has_value());
  EXPECT_EQ(cex->x, as_vector(centre_));
  EXPECT_EQ(cex->y, y_centre_);
  EXPECT_LE(dot(c_, cex->y), dot(c_, y_centre_) + 1);
}

TEST_F(CheckCandidates, RejectsPointsWhereNoDisjunctHolds) {
  // Y_0 − Y_1 ≤ IBP lower − 1 holds nowhere in the box; a second disjunct with two constraints
  // of which only one holds at the centre.
  const io::VnnlibCase c = case_of(
      box_,
      {{{{c_, ibp_lower_ - 1}}}, {{{c_, dot(c_, y_centre_) + 1}, {{0.0, 1.0}, y_centre_[1] - 1}}}});
  at::Generator gen = at::detail::createCPUGenerator(1);
  const at::Tensor x = at::cat({centre_, box_.lower, box_.upper, uniform_points(gen, box_, 50)});
  const at::Tensor y = spec_outputs(net_.graph, x, at::eye(2));
  const auto cex = bab::check_candidates(net_.graph, c, x);
  // Unless some sample happens to satisfy the second disjunct (checked here by hand).
  const at::Tensor second =
      (at::matmul(y, at::tensor({1.0, -1.0}, at::kDouble)) <= dot(c_, y_centre_) + 1) &
      (y.select(1, 1) <= y_centre_[1] - 1);
  ASSERT_FALSE(second.any().item<bool>()) << "pick other points";
  EXPECT_FALSE(cex.has_value()) << "accepted x = " << at::tensor(cex->x);
  // And an empty or undefined candidate set.
  EXPECT_FALSE(bab::check_candidates(net_.graph, c, at::Tensor()).has_value());
}

TEST_F(CheckCandidates, PicksTheCandidateThatHolds) {
  // Y_0 − Y_1 ≤ its minimum over 200 candidates: only the minimiser satisfies it.
  at::Generator gen = at::detail::createCPUGenerator(2);
  const at::Tensor x = uniform_points(gen, box_, 200);
  const at::Tensor v = spec_outputs(net_.graph, x, row({1.0, -1.0}));
  const int64_t best = v.argmin().item<int64_t>();
  const double rhs = v[best][0].item<double>();
  const io::VnnlibCase c = case_of(box_, {{{{c_, rhs}}}});
  // Objectives in double: the constraint exactly as written (see the file comment on float32).
  const auto cex = bab::check_candidates(net_.graph, c, x);
  ASSERT_TRUE(cex.has_value());
  EXPECT_EQ(cex->x, as_vector(x[best]));
  EXPECT_LE(dot(c_, cex->y), rhs);
}

TEST_F(CheckCandidates, ClampsPointsIntoTheBox) {
  // A disjunct that holds everywhere: the point returned is the candidate clamped into the box,
  // with the output at the clamped point.
  const io::VnnlibCase c = case_of(box_, {{{{c_, ibp_upper_ + 1}}}});
  const at::Tensor x = row({5.0, -3.0, 0.25});
  const auto cex = bab::check_candidates(net_.graph, c, x);
  ASSERT_TRUE(cex.has_value());
  const std::vector<double> expected{0.5, -0.25, 0.25};
  EXPECT_EQ(cex->x, expected);
  c10::NoGradGuard no_grad;
  EXPECT_EQ(cex->y, as_vector(net_.graph.forward(row({0.5, -0.25, 0.25}))));
}

// A joined objective: a domain's value is the smallest of its disjuncts' values (each the
// largest of its rows' lb − rhs), its open rows those of disjuncts not proved, and a concrete
// output's margin the smallest disjunct margin.
TEST(Objective, JoinedValueIsTheWorstDisjunct) {
  const auto obj = [](const std::vector<double>& c, const std::vector<double>& rhs) {
    const auto K = int64_t(rhs.size());
    return bab::Objective{at::tensor(c, at::kDouble).reshape({K, -1}).to(at::kFloat),
                          at::tensor(rhs, at::kDouble),
                          {}};
  };
  // Disjunct 0: one row (y0 ≤ 0); disjunct 1: two rows (y1 ≤ 1 and y0 + y1 ≤ 0.5).
  const bab::Objective j = bab::join_disjuncts({obj({1, 0}, {0.0}), obj({0, 1, 1, 1}, {1.0, 0.5})});
  ASSERT_EQ(j.disjunct_rows, (std::vector<int64_t>{1, 2}));
  // lower bounds of the three rows for two domains.
  const at::Tensor lower =
      at::tensor({0.25, 0.5, 0.25, -1.0, 0.75, 1.0}, at::kFloat).reshape({2, 3});
  const at::Tensor v = bab::domain_values(j, lower);
  // Domain 0: min(0.25, max(-0.5, -0.25)) = -0.25; domain 1: min(-1, max(-0.25, 0.5)) = -1.
  EXPECT_DOUBLE_EQ(v[0].item<double>(), -0.25);
  EXPECT_DOUBLE_EQ(v[1].item<double>(), -1.0);
  const at::Tensor open = bab::open_rows(j, lower);
  EXPECT_TRUE(
      at::equal(open, at::tensor({0.0, 1.0, 1.0, 1.0, 0.0, 0.0}, at::kFloat).reshape({2, 3})));
  // y = (0.5, 0.1): no disjunct holds (y0 > 0; y0 + y1 = 0.6 > 0.5); y = (0.5, −0.2):
  // disjunct 1 holds (−0.2 ≤ 1, 0.3 ≤ 0.5).
  const at::Tensor y = at::tensor({0.5, 0.1, 0.5, -0.2}, at::kDouble).reshape({2, 2});
  const at::Tensor m = bab::margins(j, y);
  EXPECT_GT(m[0].item<double>(), 0);
  EXPECT_LE(m[1].item<double>(), 0);
  // One disjunct alone keeps its old meaning: the largest row value.
  const bab::Objective single = obj({0, 1, 1, 1}, {1.0, 0.5});
  EXPECT_DOUBLE_EQ(bab::domain_values(single, lower.slice(1, 1, 3))[1].item<double>(), 0.5);
  EXPECT_TRUE(at::equal(bab::open_rows(single, lower.slice(1, 1, 3)), at::ones({2, 2})));
}

TEST(FormatResult, SatListsTheCounterexample) {
  bab::VerifyResult r;
  r.verdict = bab::Verdict::kSat;
  r.counterexample = bab::Counterexample{{0.5, -1.25}, {3.0, 0.125, -2.0}};
  const std::string s = bab::format_result(r);
  EXPECT_EQ(s.rfind("sat\n", 0), 0u) << s;
  EXPECT_EQ(s, "sat\n((X_0 0.5)\n (X_1 -1.25)\n (Y_0 3)\n (Y_1 0.125)\n (Y_2 -2))\n");
  // Values round-trip in double.
  r.counterexample = bab::Counterexample{{0.1}, {1.0 / 3.0}};
  const std::string t = bab::format_result(r);
  double x = 0, y = 0;
  ASSERT_EQ(std::sscanf(t.c_str(), "sat\n((X_0 %lf)\n (Y_0 %lf))", &x, &y), 2) << t;
  EXPECT_EQ(x, 0.1);
  EXPECT_EQ(y, 1.0 / 3.0);
}

TEST(FormatResult, OtherVerdictsAreOneLine) {
  bab::VerifyResult r;
  r.verdict = bab::Verdict::kUnsat;
  EXPECT_EQ(bab::format_result(r), "unsat\n");
  r.verdict = bab::Verdict::kTimeout;
  EXPECT_EQ(bab::format_result(r), "timeout\n");
  r.verdict = bab::Verdict::kUnknown;
  EXPECT_EQ(bab::format_result(r), "unknown\n");
}

// ---------------------------------------------------------------------------------------------
// verify().

io::VnnlibProperty property_of(const InputBox& box, int64_t n_out,
                               std::vector<io::OutputConjunction> disjuncts) {
  io::VnnlibProperty p;
  p.source = "<test>";
  p.num_inputs = box.lower.numel();
  p.num_outputs = n_out;
  p.cases.push_back(case_of(box, std::move(disjuncts)));
  return p;
}

bool inside(const std::vector<double>& x, const io::VnnlibCase& c) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] >= c.input_lower[i] && x[i] <= c.input_upper[i])) return false;
  }
  return x.size() == c.input_lower.size();
}

TEST(Verify, TriviallyTrueIsUnsatTriviallyFalseIsSat) {
  const std::vector<Layer> layers = random_layers({6, 16, 16, 3}, 4);
  const Net net = build(layers);
  at::Generator gen = at::detail::createCPUGenerator(4);
  const InputBox box = box_around(gen, 6, 0.3);
  const Interval ibp = ibp_bounds(net.graph, box);
  c10::NoGradGuard no_grad;
  const std::vector<double> y0 = as_vector(net.graph.forward((box.lower + box.upper) / 2));
  const std::vector<double> e0{1.0, 0.0, 0.0};
  for (const auto split : {bab::SplitMode::kRelu, bab::SplitMode::kInput}) {
    SCOPED_TRACE(split == bab::SplitMode::kRelu ? "relu splits" : "input splits");
    bab::VerifyOptions o;
    o.timeout_s = 60;
    o.split = split;
    // Unsafe: Y_0 ≤ IBP lower − 1 — impossible.
    const auto t = property_of(box, 3, {{{{e0, ibp.lower[0][0].item<double>() - 1}}}});
    const bab::VerifyResult rt = bab::verify(net.graph, t, o);
    EXPECT_EQ(bab::to_string(rt.verdict), "unsat") << rt.detail;
    EXPECT_FALSE(rt.counterexample.has_value());
    // Unsafe: Y_0 ≤ value at the centre + 1 — the centre is a counterexample.
    const auto f = property_of(box, 3, {{{{e0, y0[0] + 1}}}});
    const bab::VerifyResult rf = bab::verify(net.graph, f, o);
    ASSERT_EQ(bab::to_string(rf.verdict), "sat") << rf.detail;
    ASSERT_TRUE(rf.counterexample.has_value());
    EXPECT_TRUE(inside(rf.counterexample->x, f.cases[0]));
    const at::Tensor x = at::tensor(rf.counterexample->x, at::kDouble).reshape({1, 6});
    const auto again = bab::check_candidates(net.graph, f.cases[0], x.to(at::kFloat));
    ASSERT_TRUE(again.has_value());
    // The same point; its output from a forward pass of another batch size (float32 GEMMs
    // round differently).
    EXPECT_EQ(again->x, rf.counterexample->x);
    ASSERT_EQ(again->y.size(), rf.counterexample->y.size());
    for (size_t j = 0; j < again->y.size(); ++j) {
      EXPECT_NEAR(again->y[j], rf.counterexample->y[j],
                  kTol * std::max(1.0, std::abs(again->y[j])));
    }
    EXPECT_EQ(bab::format_result(rf).rfind("sat\n((X_0 ", 0), 0u);
  }
}

TEST(Verify, TimeoutOnAnUndecidedFixture) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto model = testing::fixtures_dir() / "models" / "mnist_256x6.onnx";
  const auto spec = testing::fixtures_dir() / "specs" / "mnist_prop_2_0.05.vnnlib";
  {  // The library.
    const io::Problem p = io::load_problem(model.string(), spec.string());
    bab::VerifyOptions o;
    o.timeout_s = 2;
    const auto start = std::chrono::steady_clock::now();
    const bab::VerifyResult r = bab::verify(p.graph, p.property, o);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(bab::to_string(r.verdict), "timeout") << r.detail;
    EXPECT_LT(secs, 2 + 5.0) << r.detail;
    std::cout << "  verify(): " << secs << " s, " << r.detail << "\n";
  }
  {  // The CLI.
    testing::TempDir dir;
    const auto out = dir / "result.txt";
    const auto start = std::chrono::steady_clock::now();
    const testing::ProcessResult r =
        testing::run_captured(testing::shell_quote(DISTCROWN_CLI_PATH) + " verify --model " +
                                  testing::shell_quote(model.string()) + " --vnnlib " +
                                  testing::shell_quote(spec.string()) + " --timeout 3 --result " +
                                  testing::shell_quote(out.string()),
                              dir.path());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(secs, 3 + 5.0) << r.err;
    std::cout << "  distcrown verify: " << secs << " s\n";
    const std::string text = testing::read_file(out);
    EXPECT_EQ(text.substr(0, text.find('\n')), "timeout") << text;
    EXPECT_EQ(r.out, text);
  }
}

TEST(Verify, CounterexampleSatisfiesTheConstraintAsWritten) {
  // A single point (zero-width box) and a network whose arithmetic is exact there (weights,
  // biases and input multiples of 1/8): Y_0 = v exactly. The unsafe set Y_0 <= v − 1e-9 is empty
  // as written, but float32 rounds its rhs to v. "sat" would report a point that violates its
  // own constraint (attack.hpp: the check is in double).
  std::vector<Layer> layers = random_layers({3, 4, 2}, 6);
  for (Layer& l : layers) {
    l.W = at::round(l.W * 16) / 8;
    l.b = at::round(l.b * 16) / 8;
  }
  const Net net = build(layers);
  const at::Tensor x = row({0.25, -0.5, 0.75});
  const double v =
      at::matmul(at::relu(at::matmul(x.to(at::kDouble), layers[0].W.t()) + layers[0].b),
                 layers[1].W.t())[0][0]
          .item<double>() +
      layers[1].b[0].item<double>();
  {
    c10::NoGradGuard no_grad;
    ASSERT_EQ(net.graph.forward(x)[0][0].item<double>(), v) << "not exact";
  }
  const double rhs = v - 1e-9;
  ASSERT_EQ(double(float(rhs)), v) << "pick another rhs";
  const io::VnnlibProperty p = property_of({x, x}, 2, {{{{{1.0, 0.0}, rhs}}}});
  bab::VerifyOptions o;
  o.timeout_s = 10;
  o.split = bab::SplitMode::kRelu;
  const bab::VerifyResult r = bab::verify(net.graph, p, o);
  EXPECT_NE(bab::to_string(r.verdict), "sat")
      << "counterexample Y_0 = " << fmt(r.counterexample ? r.counterexample->y[0] : 0.0)
      << " > rhs " << fmt(rhs) << " (" << r.detail << ")";
}

std::string status(const bab::BabResult& r) {
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
double sampled_min(const BoundGraph& g, const InputBox& box, at::Generator& gen, int64_t n) {
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

// A true property that α-CROWN cannot prove at the root: Y_0 ≤ rhs unsafe with rhs between the
// α-CROWN lower bound and the sampled minimum.
struct HardProperty {
  Net net;
  InputBox box;
  double alpha_lower = 0, minimum = 0, rhs = 0;
  io::VnnlibProperty property;
};

HardProperty hard_property(double fraction) {
  const std::vector<Layer> layers = random_layers({5, 20, 20, 1}, 12);
  HardProperty h{build(layers), {}, 0, 0, 0, {}};
  at::Generator gen = at::detail::createCPUGenerator(12);
  h.box = box_around(gen, 5, 0.5);
  AlphaOptions ao;  // as verify() at the root
  h.alpha_lower =
      alpha_crown(h.net.graph, h.box, at::eye(1), ao, {}, true, false).bounds.lower.item<double>();
  h.minimum = sampled_min(h.net.graph, h.box, gen, 20000);
  h.rhs = h.alpha_lower + fraction * (h.minimum - h.alpha_lower);
  h.property = property_of(h.box, 1, {{{{{1.0}, h.rhs}}}});
  return h;
}

TEST(ReluBab, ProvesATruePropertyInRounds) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  ASSERT_LT(h.rhs, h.minimum);
  bab::VerifyOptions o;
  o.timeout_s = 30;
  o.split = bab::SplitMode::kRelu;
  const bab::VerifyResult r = bab::verify(h.net.graph, h.property, o);
  EXPECT_NE(bab::to_string(r.verdict), "sat")
      << "a counterexample below the sampled minimum " << h.minimum << ": "
      << (r.counterexample ? r.counterexample->y[0] : 0.0);
  EXPECT_EQ(bab::to_string(r.verdict), "unsat")
      << r.detail << " (alpha lower " << h.alpha_lower << ", rhs " << h.rhs << ", min " << h.minimum
      << ")";
  // Straight through relu_bab: proved, after at least one round.
  const auto objs = objectives(h.property.cases[0], 1);
  const bab::Deadline deadline(30);
  const bab::BabResult b =
      bab::relu_bab(h.net.graph, h.property.cases[0], objs[0], objs, bab::BabOptions{}, deadline);
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
  EXPECT_GE(b.domains_bounded, 3);
}

// Each branching heuristic (greedy BaBSR, FSB) with either reduction proves it, in rounds.
TEST(ReluBab, EveryBranchingProvesIt) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  const auto objs = objectives(h.property.cases[0], 1);
  for (const bab::Branching branching : {bab::Branching::kBabsr, bab::Branching::kFsb}) {
    for (const bab::BranchingReduce reduce :
         {bab::BranchingReduce::kMin, bab::BranchingReduce::kMax}) {
      bab::BabOptions o;
      o.branching = branching;
      o.branching_reduce = reduce;
      const bab::Deadline deadline(30);
      const bab::BabResult b =
          bab::relu_bab(h.net.graph, h.property.cases[0], objs[0], objs, o, deadline);
      EXPECT_EQ(status(b), "proved") << int(branching) << "/" << int(reduce) << ": " << b.reason;
      EXPECT_GE(b.rounds, 1);
    }
  }
}

// Two disjuncts left open by α-CROWN (y ≤ rhs, and 2y ≤ 2·rhs − 0.01 as its own row), searched
// joined (one tree, a domain done when both are impossible on it) and each in turn: both unsat,
// the joined search bounding domains of its own.
TEST(ReluBab, JoinedDisjunctsAreProvedTogether) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto p = property_of(h.box, 1, {{{{{1.0}, h.rhs}}}, {{{{2.0}, 2 * h.rhs - 0.01}}}});
  for (const auto mode : {bab::DisjunctSearch::kJoined, bab::DisjunctSearch::kEach}) {
    SCOPED_TRACE(std::string(enum_name(mode)));
    bab::VerifyOptions o;
    o.timeout_s = 60;
    o.split = bab::SplitMode::kRelu;
    o.bab.disjuncts = mode;
    const bab::VerifyResult r = bab::verify(h.net.graph, p, o);
    EXPECT_EQ(bab::to_string(r.verdict), "unsat") << r.detail;
    EXPECT_GE(r.domains_bounded, 3);
  }
  // Straight through relu_bab with the joined objective: proved in rounds.
  const auto objs = objectives(p.cases[0], 1);
  const bab::Objective joined = bab::join_disjuncts(objs);
  const bab::Deadline deadline(60);
  const bab::BabResult b =
      bab::relu_bab(h.net.graph, p.cases[0], joined, objs, bab::BabOptions{}, deadline);
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
}

// ReLU splitting on a network that also has a relaxed node it does not split (a Sigmoid between
// ReLU layers): the Sigmoid's input gets CROWN bounds over each batch of domains, branch and
// bound runs rounds instead of failing for want of them, and the bound they prove lies between
// α-CROWN's and the sampled minimum.
TEST(ReluBab, RunsRoundsThroughAnUnsplitSigmoid) {
  at::Generator gen = at::detail::createCPUGenerator(5);
  testing::OnnxBuilder b;
  b.input("x", {1, 5}).output("y", {1, 1});
  const std::vector<std::pair<int64_t, int64_t>> dims{{20, 5}, {20, 20}, {20, 20}, {1, 20}};
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto [out, in] = dims[i];
    b.initializer("W" + std::to_string(i),
                  at::randn({out, in}, gen) * (1.5 / std::sqrt(double(in))));
    b.initializer("b" + std::to_string(i), at::randn({out}, gen) * 0.1);
  }
  const auto gemm = [&](int i, const std::string& x, const std::string& y) {
    const std::string k = std::to_string(i);
    b.node("fc" + k, "Gemm", {x, "W" + k, "b" + k}, {y}, {testing::attr_int("transB", 1)});
  };
  gemm(0, "x", "h0");
  b.node("relu0", "Relu", {"h0"}, {"a0"});
  gemm(1, "a0", "h1");
  b.node("sig", "Sigmoid", {"h1"}, {"a1"});
  gemm(2, "a1", "h2");
  b.node("relu2", "Relu", {"h2"}, {"a2"});
  gemm(3, "a2", "y");
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "relu_sigmoid.onnx");
  const InputBox box = box_around(gen, 5, 1.0);
  AlphaOptions ao;
  const double alpha_lower =
      alpha_crown(g, box, at::eye(1), ao, {}, true, false).bounds.lower.item<double>();
  const double minimum = sampled_min(g, box, gen, 20000);
  ASSERT_LT(alpha_lower, minimum);
  const double rhs = alpha_lower + 0.5 * (minimum - alpha_lower);
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, rhs}}}});
  const auto objs = objectives(p.cases[0], 1);
  bab::BabOptions o;
  o.deterministic = true;
  o.max_rounds = 3;
  o.batch = 4;
  const bab::Deadline deadline(0);
  const bab::BabResult r = bab::relu_bab(g, p.cases[0], objs[0], objs, o, deadline);
  EXPECT_NE(status(r), "falsified") << "the property holds below the sampled minimum";
  EXPECT_GE(r.rounds, 1) << status(r) << ": " << r.reason;
  EXPECT_GT(r.domains_bounded, 1);
  // Stopped by the round limit, the search leaves its worst domain value, lb(Y_0) − rhs: rhs plus
  // it is the lower bound of Y_0 over the box that the rounds proved. Sound, it lies at or below
  // the sampled minimum; and the rounds refine α-CROWN's root bound, never loosen it.
  ASSERT_EQ(status(r), "unknown") << r.reason;
  const double proved = rhs + r.worst_value;
  EXPECT_LE(proved, minimum + kTol * std::max(1.0, std::abs(minimum)))
      << "bound " << fmt(proved) << " above the sampled minimum " << fmt(minimum);
  EXPECT_GE(proved, alpha_lower - kTol * std::max(1.0, std::abs(alpha_lower)))
      << "bound " << fmt(proved) << " below alpha-CROWN's root bound " << fmt(alpha_lower);
}

TEST(ReluBab, DeterministicRunsAgree) {
  const HardProperty h = hard_property(0.95);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto objs = objectives(h.property.cases[0], 1);
  bab::BabOptions o;
  o.deterministic = true;
  o.max_rounds = 3;
  o.batch = 4;
  const auto run = [&] {
    const bab::Deadline deadline(0);
    return bab::relu_bab(h.net.graph, h.property.cases[0], objs[0], objs, o, deadline);
  };
  const bab::BabResult a = run();
  const bab::BabResult b = run();
  EXPECT_NE(status(a), "falsified");
  EXPECT_NE(status(a), "timeout");
  EXPECT_LE(a.rounds, 3);
  EXPECT_GE(a.rounds, 1) << "decided at the root: the comparison covers no branching";
  EXPECT_EQ(status(a), status(b));
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.domains_bounded, b.domains_bounded);
  EXPECT_EQ(a.worst_value, b.worst_value);
  EXPECT_EQ(a.max_queue, b.max_queue);
}

// Children are never looser than their parent (a child's value is floored at its parent's), so
// the worst value left can only rise from one round to the next: deterministic runs stopped
// after 1, 2, ... rounds are prefixes of one search. With fixed and refreshed intermediate
// bounds, which must both keep the property unfalsified.
TEST(ReluBab, WorstBoundNeverFallsFromRoundToRound) {
  const HardProperty h = hard_property(0.95);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto objs = objectives(h.property.cases[0], 1);
  for (const auto mode : {bab::BabIntermediate::kFixed, bab::BabIntermediate::kRefresh}) {
    SCOPED_TRACE(std::string(enum_name(mode)));
    bab::BabOptions o;
    o.deterministic = true;
    o.batch = 2;
    o.intermediate = mode;
    double last = -std::numeric_limits<double>::infinity();
    int rounds = 0;
    for (int64_t k = 1; k <= 5; ++k) {
      o.max_rounds = k;
      const bab::Deadline deadline(0);
      const bab::BabResult r =
          bab::relu_bab(h.net.graph, h.property.cases[0], objs[0], objs, o, deadline);
      ASSERT_NE(status(r), "falsified");
      if (status(r) != "unknown") break;  // proved within k rounds
      EXPECT_GE(r.worst_value, last) << "after " << k << " rounds";
      last = r.worst_value;
      ++rounds;
    }
    EXPECT_GE(rounds, 2) << "decided too early to compare rounds";
  }
}

// The memory limit (BabOptions::memory_limit_bytes) against the accountant's live tensor bytes.
// A search of batch 64 and 6 rounds is first run under a limit it never nears, measuring its
// peak above what was live before it; a quarter of that as the limit's room must shrink the
// batch, and the search must still not falsify the true property (it may end unknown at the
// limit, after its rounds).
class ReluBabMemory : public ::testing::Test {
 protected:
  void SetUp() override { memory::install_counting_allocator(); }

  bab::BabResult run(const bab::BabOptions& o) const {
    const bab::Deadline deadline(0);
    return bab::relu_bab(h_.net.graph, h_.property.cases[0], objs_[0], objs_, o, deadline);
  }

  HardProperty h_ = hard_property(0.95);
  std::vector<bab::Objective> objs_ = objectives(h_.property.cases[0], 1);
};

bool memory_reason(const bab::BabResult& r) {
  return r.reason.find("memory limit reached: ") != std::string::npos &&
         r.reason.find(" MB live, limit ") != std::string::npos;
}

TEST_F(ReluBabMemory, ATightLimitShrinksTheBatch) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  bab::BabOptions o;
  o.batch = 64;
  o.max_rounds = 6;
  const int64_t live = memory::live_bytes();
  o.memory_limit_bytes = live + (int64_t{1} << 30);
  memory::reset_peak();
  const bab::BabResult free = run(o);
  const int64_t cost = memory::peak_bytes() - live;
  ASSERT_NE(status(free), "falsified");
  ASSERT_GE(free.rounds, 3) << status(free) << ": " << free.reason;
  EXPECT_EQ(free.min_batch, 64);
  EXPECT_FALSE(free.memory_limited);
  ASSERT_GT(cost, 0);

  o.memory_limit_bytes = memory::live_bytes() + cost / 4;
  const bab::BabResult tight = run(o);
  EXPECT_NE(status(tight), "falsified") << "the property holds below the sampled minimum";
  EXPECT_GE(tight.rounds, 1) << status(tight) << ": " << tight.reason;
  EXPECT_GE(tight.min_batch, 1);
  EXPECT_LT(tight.min_batch, 64) << status(tight) << ": " << tight.reason;
  EXPECT_TRUE(tight.memory_limited);
  if (status(tight) == "unknown" && tight.rounds < 6) {
    EXPECT_TRUE(memory_reason(tight)) << tight.reason;
  }
}

TEST_F(ReluBabMemory, ALimitBelowWhatIsLiveStopsUnknown) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "adaptive");
    bab::BabOptions o;
    o.deterministic = deterministic;
    o.memory_limit_bytes = 1;  // the queued root alone is more
    const bab::BabResult r = run(o);
    EXPECT_EQ(status(r), "unknown");
    EXPECT_TRUE(memory_reason(r)) << r.reason;
    EXPECT_TRUE(r.memory_limited);
    EXPECT_EQ(r.rounds, 0);
    EXPECT_EQ(r.min_batch, 0);
  }
  bab::BabOptions o;
  o.memory_limit_bytes = -1;
  EXPECT_THROW((void)run(o), InvalidArgument);
}

// Deterministic: the batch never adapts. Under a limit it never nears, the search is the one
// without a limit; under a tight one, every round it runs has the full batch, and it ends
// unknown at the limit or does the same work.
TEST_F(ReluBabMemory, DeterministicNeverResizes) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  bab::BabOptions o;
  o.deterministic = true;
  o.batch = 8;
  o.max_rounds = 4;
  const int64_t live = memory::live_bytes();
  o.memory_limit_bytes = live + (int64_t{1} << 30);
  memory::reset_peak();
  const bab::BabResult free = run(o);
  const int64_t cost = memory::peak_bytes() - live;
  ASSERT_NE(status(free), "falsified");
  ASSERT_GE(free.rounds, 2) << status(free) << ": " << free.reason;
  EXPECT_EQ(free.min_batch, 8);
  EXPECT_FALSE(free.memory_limited);
  ASSERT_GT(cost, 0);

  o.memory_limit_bytes = memory::live_bytes() + cost / 2;
  const bab::BabResult tight = run(o);
  EXPECT_NE(status(tight), "falsified");
  if (tight.rounds > 0) {
    EXPECT_EQ(tight.min_batch, 8);
  }
  if (tight.memory_limited) {
    EXPECT_EQ(status(tight), "unknown");
    EXPECT_TRUE(memory_reason(tight)) << tight.reason;
    EXPECT_LE(tight.rounds, free.rounds);
  } else {
    EXPECT_EQ(status(tight), status(free));
    EXPECT_EQ(tight.rounds, free.rounds);
    EXPECT_EQ(tight.domains_bounded, free.domains_bounded);
    EXPECT_EQ(tight.worst_value, free.worst_value);
  }
}

// The minimum of a 2-input, 1-output network on a 401 x 401 grid of [-1, 1]² (spacing 0.005).
double grid_minimum(const BoundGraph& g) {
  const at::Tensor g1 = at::linspace(-1.0, 1.0, 401, at::kDouble);
  const auto mesh = at::meshgrid({g1, g1}, "ij");
  const at::Tensor grid = at::stack({mesh[0].reshape({-1}), mesh[1].reshape({-1})}, 1);
  c10::NoGradGuard no_grad;
  return g.forward(grid.to(g.dtype())).min().item<double>();
}

TEST(InputBab, ProvesWhatCrownCannot) {
  const std::vector<Layer> layers = random_layers({2, 16, 16, 1}, 9);
  Net net = build(layers, at::kDouble);
  const InputBox box{at::full({1, 2}, -1.0, at::kDouble), at::full({1, 2}, 1.0, at::kDouble)};
  const double minimum = grid_minimum(net.graph);
  const double crown = compute_bounds(net.graph, box, Method::kCrown).lower.item<double>();
  const double rhs = crown + 0.5 * (minimum - crown);
  ASSERT_LT(crown, rhs) << "CROWN proves it at the root";
  ASSERT_GT(minimum - rhs, 1e-3) << "too close to the minimum to be sure it is true";
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, rhs}}}});
  bab::VerifyOptions o;
  o.timeout_s = 30;
  o.split = bab::SplitMode::kInput;
  const bab::VerifyResult r = bab::verify(net.graph, p, o);
  EXPECT_EQ(bab::to_string(r.verdict), "unsat")
      << r.detail << " (crown " << crown << ", rhs " << rhs << ", grid min " << minimum << ")";
  EXPECT_GT(r.domains_bounded, 1);
  // input_bab alone: proved, in rounds.
  const auto objs = objectives(p.cases[0], 1, at::kDouble);
  const bab::Deadline deadline(30);
  const bab::BabResult b = bab::input_bab(net.graph, p.cases[0], objs[0], objs, {}, deadline);
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
}

// The split score is the looseness Σ_k |A_ki|·radius_i: neither the widest dimension (2) nor the
// one with the largest coefficient of one row (0) but the one that adds the most to all rows (1).
TEST(InputSplitScore, ChoosesTheDimensionThatAddsTheMostLooseness) {
  const auto d = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor A = at::tensor({3.0, 2.0, 0.1, 0.0, 2.0, 0.1}, d).reshape({1, 2, 3});
  const at::Tensor radius = at::tensor({0.5, 0.5, 1.0}, d).reshape({1, 3});
  const at::Tensor score = bab::input_split_scores(A, radius);
  EXPECT_EQ(score.argmax(1).item<int64_t>(), 1) << score;
  EXPECT_NEAR(score[0][1].item<double>(), 2.0, 1e-6);  // (2 + 2) · 0.5
  // Dimensions no row depends on: the widest.
  const at::Tensor flat = bab::input_split_scores(at::zeros({1, 2, 3}, d), radius);
  EXPECT_EQ(flat.argmax(1).item<int64_t>(), 2) << flat;
}

// Records the A reaching the input in passes from `start`.
class InputAOf final : public RelaxationHook {
 public:
  explicit InputAOf(int start) : start_(start) {}
  RelaxParams params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                     std::span<const Interval* const> /*in*/) override {
    return {};
  }
  void observe(int start, int node, const BoundA& a) override {
    if (start == start_ && node == 0) lA = a.lA;
  }
  at::Tensor lA;  // [K, B, *input_shape]

 private:
  int start_;
};

// Clipping keeps every sampled counterexample: points of a box where both rows hold (y_k <= rhs_k)
// stay inside the clipped box, and the clipped box is smaller (the test would not test it else).
TEST(InputClipping, KeepsEveryCounterexampleBySampling) {
  c10::NoGradGuard no_grad;
  const std::vector<Layer> layers = random_layers({3, 16, 16, 2}, 21);
  const Net net = build(layers);
  const int64_t B = 4;
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor lo = at::rand({B, 3}, gen) - 1.0;
  const InputBox box{lo, lo + 0.2 + at::rand({B, 3}, gen)};
  CrownEngine engine(net.graph, box, {});
  InputAOf hook(net.graph.output());
  engine.set_hook(&hook);
  engine.compute_intermediate_bounds();
  const at::Tensor C = at::eye(2, at::kFloat);  // rows y_0, y_1
  const at::Tensor crown =
      engine.backward_from(net.graph.output(), BoundA{C.reshape({2, 1, 2}).expand({2, B, 2}), {}})
          .lower.to(at::kDouble);  // [B, 2]
  // Sampled outputs of each box; thresholds 15% of the sampled range above its minimum, so some
  // samples are counterexamples and the linear bounds cut some of the box away.
  const int64_t N = 20000;
  const at::Tensor u = at::rand({B, N, 3}, gen);
  const at::Tensor x = (box.lower.unsqueeze(1) + u * (box.upper - box.lower).unsqueeze(1));
  const at::Tensor y = net.graph.forward(x.reshape({B * N, 3})).reshape({B, N, 2}).to(at::kDouble);
  const at::Tensor y_min = std::get<0>(y.min(1));  // [B, 2]
  const at::Tensor rhs = y_min + 0.15 * (std::get<0>(y.max(1)) - y_min);
  const at::Tensor A = hook.lA.to(at::kDouble).permute({1, 0, 2});  // [B, 2, 3]
  const bab::ClippedBoxes c =
      bab::clip_to_violations(box.lower.to(at::kDouble), box.upper.to(at::kDouble), A, crown - rhs);
  const at::Tensor violating = (y <= rhs.unsqueeze(1)).all(2);  // [B, N]
  ASSERT_GT(violating.sum().item<int64_t>(), 100) << "too few counterexamples to test";
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor in_clipped =
      ((xd >= c.lower.unsqueeze(1)) & (xd <= c.upper.unsqueeze(1))).all(2);  // [B, N]
  EXPECT_EQ((violating & ~in_clipped).sum().item<int64_t>(), 0);
  const double before = (box.upper - box.lower).to(at::kDouble).prod(1).sum().item<double>();
  const double after = (c.upper - c.lower).prod(1).sum().item<double>();
  EXPECT_LT(after, 0.95 * before) << "clipping removed nothing: the test tests nothing";
  EXPECT_FALSE(c.empty.any().item<bool>());
}

// A box where a row's bound is above its threshold everywhere is empty after clipping.
TEST(InputClipping, AProvedRowEmptiesTheBox) {
  const auto d = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor l = at::zeros({1, 2}, d);
  const at::Tensor u = at::ones({1, 2}, d);
  const at::Tensor A = at::tensor({1.0, -1.0, 1.0, 1.0}, d).reshape({1, 2, 2});
  // x0 − x1 + 0.5 <= 0 and x0 + x1 − 0.5 <= 0 on the unit square. One pass: x0 <= 0.5 (both
  // rows), x1 >= 0.5 (the first), x1 <= 0.5 (the second). A second pass on that box: x0 <= 0.
  const at::Tensor gap = at::tensor({-0.5, -0.5}, d).reshape({1, 2});
  const bab::ClippedBoxes one = bab::clip_to_violations(l, u, A, gap, 1);
  EXPECT_FALSE(one.empty.item<bool>());
  EXPECT_NEAR(one.upper[0][0].item<double>(), 0.5, 1e-4);
  EXPECT_NEAR(one.lower[0][1].item<double>(), 0.5, 1e-4);
  EXPECT_NEAR(one.upper[0][1].item<double>(), 0.5, 1e-4);
  const bab::ClippedBoxes two = bab::clip_to_violations(l, u, A, gap, 2);
  EXPECT_FALSE(two.empty.item<bool>());
  EXPECT_NEAR(two.upper[0][0].item<double>(), 0.0, 1e-4);
  EXPECT_GE(two.upper[0][0].item<double>(), 0.0);  // the slack widens, never narrows
  EXPECT_EQ(two.lower[0][0].item<double>(), 0.0);
  const bab::ClippedBoxes proved =
      bab::clip_to_violations(l, u, A, at::tensor({0.1, -0.5}, d).reshape({1, 2}));
  EXPECT_TRUE(proved.empty.item<bool>());
}

// A counterexample in a small region (the threshold just above the grid minimum): input BaB with
// clipping still finds it (clipping cut nothing that holds one).
TEST(InputBab, FindsACounterexampleInASmallRegion) {
  const std::vector<Layer> layers = random_layers({2, 16, 16, 1}, 9);
  Net net = build(layers, at::kDouble);
  const InputBox box{at::full({1, 2}, -1.0, at::kDouble), at::full({1, 2}, 1.0, at::kDouble)};
  const double minimum = grid_minimum(net.graph);
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, minimum + 1e-4}}}});
  const auto objs = objectives(p.cases[0], 1, at::kDouble);
  bab::BabOptions o;
  o.attack_every = 0;  // the boxes' own candidates only
  o.progress = false;
  const bab::Deadline deadline(30);
  const bab::BabResult b = bab::input_bab(net.graph, p.cases[0], objs[0], objs, o, deadline);
  ASSERT_EQ(status(b), "falsified") << b.reason;
  ASSERT_TRUE(b.counterexample.has_value());
  EXPECT_LE(b.counterexample->y.at(0), minimum + 1e-4);
  EXPECT_TRUE(inside(b.counterexample->x, p.cases[0]));
}

// The attack of a branch-and-bound round draws new random starts every round: on a property
// that holds on about 3% of the box, the 16 random starts (no PGD steps: the starts alone are
// checked) of some rounds hit it and of others miss, each round the same on every run.
TEST(RoundAttack, DrawsFreshStartsEachRound) {
  const std::vector<Layer> layers = random_layers({2, 16, 16, 1}, 9);
  Net net = build(layers, at::kDouble);
  const InputBox box{at::full({1, 2}, -1.0, at::kDouble), at::full({1, 2}, 1.0, at::kDouble)};
  double rhs = 0;
  {
    c10::NoGradGuard no_grad;
    at::Generator gen = at::detail::createCPUGenerator(11);
    const at::Tensor x = at::rand({4096, 2}, gen, at::kDouble) * 2 - 1;
    rhs = at::quantile(net.graph.forward(x).reshape({-1}), 0.03).item<double>();
  }
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, rhs}}}});
  const auto objs = objectives(p.cases[0], 1, at::kDouble);
  bab::AttackOptions root;
  root.restarts = 64;
  root.steps = 0;
  root.seed = 3;
  const bab::Deadline deadline(30);
  const bab::AttackOptions once = bab::round_attack(root, 7, deadline);
  EXPECT_EQ(once.restarts, 16);
  EXPECT_EQ(once.seed, 10u);
  root.steps = 100;
  EXPECT_EQ(bab::round_attack(root, 7, deadline).steps, 30);
  root.steps = 0;
  int hits = 0;
  int misses = 0;
  for (int64_t round = 0; round < 40; ++round) {
    const bab::AttackOptions a = bab::round_attack(root, round, deadline);
    const auto cex = bab::pgd_attack(net.graph, p.cases[0], objs, a);
    const auto again = bab::pgd_attack(net.graph, p.cases[0], objs, a);
    ASSERT_EQ(cex.has_value(), again.has_value()) << "round " << round;
    if (cex) {
      ++hits;
      EXPECT_LE(cex->y.at(0), rhs);
      EXPECT_TRUE(inside(cex->x, p.cases[0]));
      EXPECT_EQ(cex->x, again->x);
    } else {
      ++misses;
    }
  }
  EXPECT_GT(hits, 0);
  EXPECT_GT(misses, 0);
}

// A CNN whose box fixes two inputs at values float32 cannot represent (0.1 and 0.2, lower =
// upper; the collins_rul_cnn case) with a property that holds only at the exact point: y = 0.1
// exactly, computed in double (y = 0.25·2·X_0 + 0.125·2·X_1 = 0.05 + 0.05). The float32 rounding
// of the point leaves the box and misses y = 0.1; the check snaps to the exact box and evaluates
// there in double.
TEST(FixedInputs, Float32CannotRepresentThemInACnn) {
  testing::OnnxBuilder m;
  m.input("x", {1, 1, 2, 2}).output("y");
  m.initializer("Wc", at::full({1, 1, 1, 1}, 2.0F));
  m.initializer("bc", at::zeros({1}));
  m.initializer("Wf", at::tensor({0.25F, 0.125F, 0.0F, 0.0F}).reshape({1, 4}));
  m.initializer("shape", at::tensor({int64_t{1}, int64_t{4}}));
  m.node("conv", "Conv", {"x", "Wc", "bc"}, {"c"}, {io::attr_ints("kernel_shape", {1, 1})});
  m.node("relu", "Relu", {"c"}, {"r"});
  m.node("flat", "Reshape", {"r", "shape"}, {"f"});
  m.node("fc", "Gemm", {"f", "Wf"}, {"y"}, {io::attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(m.bytes(), "fixed_cnn.onnx");
  ASSERT_EQ(g.dtype(), at::kFloat);
  const io::VnnlibProperty p = io::parse_vnnlib_string(
      "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const X_2 Real)\n"
      "(declare-const X_3 Real)\n(declare-const Y_0 Real)\n"
      "(assert (>= X_0 0.1))\n(assert (<= X_0 0.1))\n(assert (>= X_1 0.2))\n"
      "(assert (<= X_1 0.2))\n(assert (>= X_2 0))\n(assert (<= X_2 1))\n(assert (>= X_3 0))\n"
      "(assert (<= X_3 1))\n(assert (>= Y_0 0.1))\n(assert (<= Y_0 0.1))\n",
      "fixed_cnn.vnnlib");
  ASSERT_NE(double(float(0.1)), 0.1);
  // The candidate as float32 holds (the rounding of the fixed values) and is clamped back.
  const at::Tensor x = at::tensor({0.1F, 0.2F, 0.5F, 0.5F}).reshape({1, 1, 2, 2});
  const auto cex = bab::check_candidates(g, p.cases[0], x);
  ASSERT_TRUE(cex.has_value()) << "the exact point was not checked in double";
  EXPECT_TRUE(inside(cex->x, p.cases[0]));
  EXPECT_EQ(cex->x.at(0), 0.1);
  EXPECT_EQ(cex->x.at(1), 0.2);
  EXPECT_EQ(cex->y.at(0), 0.1);
  // And verify() says sat.
  bab::VerifyOptions o;
  o.timeout_s = 20;
  o.bab.progress = false;
  const bab::VerifyResult r = bab::verify(g, p, o);
  EXPECT_EQ(bab::to_string(r.verdict), "sat") << r.detail;
}

}  // namespace
}  // namespace distcrown
