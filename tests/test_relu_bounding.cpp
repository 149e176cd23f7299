// Bounding one β-CROWN domain (bab::split_domain_lower_bound, src/bab/relu_bounding.cpp): split
// constraints against a network with the neuron removed and against sampled inputs that satisfy
// the splits, refreshed intermediate bounds, and splits that are not a ReLU neuron's refused.

#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

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
        const std::vector<bab::Split> split{bab::relu_split(net.relus.back(), j, false)};
        const at::Tensor split0 = lower_bound_with_splits(net.graph, box, C, split, 0);
        std::vector<Layer> removed = layers;
        removed.back().W = layers.back().W.clone();
        removed.back().W.select(1, j).zero_();
        const Net net2 = build(removed, t);
        const at::Tensor crown2 =
            compute_bounds(net2.graph, box, Method::kCrown, BoundOptions{}, C).lower;
        expect_bounds(split0, crown2, true, "split z_j <= 0 vs neuron removed");

        const at::Tensor split20 = lower_bound_with_splits(net.graph, box, C, split, 20);
        expect_bounds(split20, split0, false, "beta-optimised vs 0 iterations");
        const at::Tensor in = (z.select(1, j) <= 0).nonzero().reshape({-1});
        ASSERT_GT(in.numel(), 20) << "samples with z_j <= 0";
        expect_above(split0, y.index_select(0, in), "0 iterations, samples with z_j <= 0");
        expect_above(split20, y.index_select(0, in), "20 iterations, samples with z_j <= 0");

        const std::vector<bab::Split> active{bab::relu_split(net.relus.back(), j, true)};
        const at::Tensor act0 = lower_bound_with_splits(net.graph, box, C, active, 0);
        const at::Tensor act20 = lower_bound_with_splits(net.graph, box, C, active, 20);
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
  const std::vector<std::vector<bab::Split>> cases{
      {bab::relu_split(net.relus[0], j0[0], false)},
      {bab::relu_split(net.relus[0], j0[0], true)},
      {bab::relu_split(net.relus[1], j1[0], false)},
      {bab::relu_split(net.relus[1], j1[0], true)},
      {bab::relu_split(net.relus[0], j0[0], false), bab::relu_split(net.relus[0], j0[1], true)},
      {bab::relu_split(net.relus[0], j0[0], true), bab::relu_split(net.relus[1], j1[0], false)},
      {bab::relu_split(net.relus[0], j0[1], false), bab::relu_split(net.relus[1], j1[0], true)},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    std::string what = "splits";
    at::Tensor holds = at::ones({x.size(0)}, at::TensorOptions().dtype(at::kBool));
    for (const auto& s : cases[k]) {
      const size_t layer = s.node == net.relus[0] ? 0 : 1;
      const at::Tensor zj = z[layer].select(1, s.element);
      holds = holds & ((s.side == bab::Split::Side::kAbove) ? zj >= 0 : zj <= 0);
      what += " L" + std::to_string(layer) + "n" + std::to_string(s.element) +
              ((s.side == bab::Split::Side::kAbove) ? "+" : "-");
    }
    SCOPED_TRACE(what);
    const at::Tensor idx = holds.nonzero().reshape({-1});
    ASSERT_GT(idx.numel(), 20) << "too few samples satisfy the splits";
    const at::Tensor lb0 = lower_bound_with_splits(net.graph, box, C, cases[k], 0);
    bab::BabOptions o;
    o.lr_beta = 0.5;  // large steps: β away from 0 quickly
    const at::Tensor lb30 = lower_bound_with_splits(net.graph, box, C, cases[k], 30, o);
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
  const std::vector<std::vector<bab::Split>> cases{
      {bab::relu_split(net.relus[0], j0[0], false)},
      {bab::relu_split(net.relus[0], j0[0], true)},
      {bab::relu_split(net.relus[0], j0[0], true), bab::relu_split(net.relus[0], j0[1], false)},
      {bab::relu_split(net.relus[0], j0[1], true), bab::relu_split(net.relus[1], j1[0], false)},
      {bab::relu_split(net.relus[1], j1[0], true)},
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
      const at::Tensor zj = z[s.node == net.relus[0] ? 0 : 1].select(1, s.element);
      holds = holds & ((s.side == bab::Split::Side::kAbove) ? zj >= 0 : zj <= 0);
    }
    const at::Tensor idx = holds.nonzero().reshape({-1});
    ASSERT_GT(idx.numel(), 20) << "too few samples satisfy the splits";
    const at::Tensor lf = lower_bound_with_splits(net.graph, box, C, cases[k], 20, fixed);
    const at::Tensor lr = lower_bound_with_splits(net.graph, box, C, cases[k], 20, refresh);
    expect_above(lr, y.index_select(0, idx), "refreshed, 20 iterations");
    differ += int((lr - lf).abs().max().item<double>() > 1e-6);
  }
  EXPECT_GT(differ, 0) << "refreshing changed no bound: the refresh did not run";
}

TEST(BetaSplit, RejectsSplitsThatAreNotReluNeurons) {
  const std::vector<Layer> layers = random_layers({3, 6, 6, 2}, 1);
  const Net net = build(layers);
  const InputBox box{at::zeros({1, 3}), at::ones({1, 3})};
  const at::Tensor C = at::eye(2);
  EXPECT_THROW(
      lower_bound_with_splits(net.graph, box, C, {bab::relu_split(net.pres[0], 0, false)}, 0),
      InvalidArgument);
  EXPECT_THROW(
      lower_bound_with_splits(net.graph, box, C, {bab::relu_split(net.relus[0], 6, false)}, 0),
      InvalidArgument);
  EXPECT_THROW(
      lower_bound_with_splits(net.graph, box, C, {bab::relu_split(net.relus[0], -1, false)}, 0),
      InvalidArgument);
}

}  // namespace
}  // namespace distcrown
