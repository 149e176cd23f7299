// Branch and bound through general nonlinearities (OpTraits::splits_anywhere): which nodes the
// layout splits, the children of a split at a point inside an element's interval (sound by
// sampling, in float32 and float64), and a Tanh network's property that α-CROWN leaves open,
// proved by splitting Tanh inputs.
#include "bab/branching.hpp"
#include "bab/relu_layout.hpp"
#include "bab_testing.hpp"
#include "ops/add_sub.hpp"
#include "ops/s_shaped.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;
using testing::fmt;

// Linear -> Tanh for every layer but the last, then Linear; a ReLU after the first Tanh's input
// as well when `relu_beside` (the same input feeds both).
BoundGraph tanh_net(const std::vector<Layer>& layers, at::ScalarType dtype, bool relu_beside) {
  GraphBuilder b({1, layers.front().W.size(1)});
  int x = b.input();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const int z = b.add(
        "fc" + std::to_string(i),
        ops::make_linear(make_param(l.W.to(at::kFloat)), make_param(l.b.to(at::kFloat))), {x});
    x = z;
    if (i + 1 == layers.size()) break;
    x = b.add("tanh" + std::to_string(i), ops::make_tanh(), {z});
    if (relu_beside && i == 0) {
      const int r = b.add("relu_beside", ops::make_relu(), {z});
      x = b.add("sum", ops::make_add(), {x, r});
    }
  }
  BoundGraph g = std::move(b).finish(x);
  g.to_dtype(dtype);
  return g;
}

TEST(GeneralBab, LayoutSplitsTanhInputsOnceEach) {
  const std::vector<Layer> layers = random_layers({3, 8, 8, 1}, 4);
  const BoundGraph g = tanh_net(layers, at::kFloat, false);
  const bab::detail::ReluLayout layout(g);
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_TRUE(layout.general(0));
  EXPECT_TRUE(layout.general(1));
  EXPECT_TRUE(layout.relu_index().empty());
  EXPECT_TRUE(layout.other_pre().empty());
  // An input that feeds a ReLU as well is the ReLU's entry (split at 0, with β), not the Tanh's.
  const BoundGraph both = tanh_net(layers, at::kFloat, true);
  const bab::detail::ReluLayout mixed(both);
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_FALSE(mixed.general(0));
  EXPECT_TRUE(mixed.general(1));
  EXPECT_EQ(mixed.relu_index().size(), 1u);
}

// Both children of a split of the first Tanh's widest input at its midpoint bound Y_0 from below
// over their part of the box: every sampled input whose pre-activation lies on the child's side
// has its output at or above the child's bound; with α/β steps as without.
TEST(GeneralBab, ChildrenOfAPointSplitAreSoundBySampling) {
  const std::vector<Layer> layers = random_layers({5, 20, 20, 1}, 12);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(dtype == at::kFloat ? "float32" : "float64");
    const BoundGraph g = tanh_net(layers, dtype, false);
    at::Generator gen = at::detail::createCPUGenerator(12);
    const InputBox cpu = box_around(gen, 5, 0.5);
    const InputBox box{cpu.lower.to(dtype), cpu.upper.to(dtype)};
    const bab::detail::ReluLayout layout(g);
    const int pre = layout.pre(0);
    CrownEngine engine(g, box, BoundOptions{});
    engine.compute_intermediate_bounds();
    const Interval in = engine.bounds(pre);
    const int64_t j = (in.upper - in.lower).reshape({-1}).argmax().item<int64_t>();
    const double l = in.lower.reshape({-1})[j].item<double>();
    const double u = in.upper.reshape({-1})[j].item<double>();
    const std::optional<double> p = bab::split_midpoint(l, u, dtype);
    ASSERT_TRUE(p.has_value());
    const at::Tensor x = uniform_points(gen, box, 20000);
    const std::vector<at::Tensor> values = g.forward_values(x);
    const at::Tensor z = values[size_t(pre)].reshape({x.size(0), -1}).select(1, j);
    const at::Tensor y = values[size_t(g.output())].reshape({-1});
    for (const bool above : {false, true}) {
      const bab::Split s{layout.relu(0), j, *p,
                         above ? bab::Split::Side::kAbove : bab::Split::Side::kBelow};
      const at::Tensor side = above ? z >= *p : z <= *p;
      ASSERT_GT(side.sum().item<int64_t>(), 100) << "too few samples on the side";
      const double sampled = y.masked_select(side).min().item<double>();
      for (const int iterations : {0, 5}) {
        const double lb = lower_bound_with_splits(
                              g, box, at::eye(1, at::TensorOptions().dtype(dtype)), {s}, iterations)
                              .item<double>();
        EXPECT_LE(lb, sampled + kTol * std::max(1.0, std::abs(sampled)))
            << (above ? "above" : "below") << ", " << iterations << " iterations: bound " << fmt(lb)
            << " over the sampled minimum " << fmt(sampled);
      }
    }
    EXPECT_THROW(
        lower_bound_with_splits(g, box, at::eye(1, at::TensorOptions().dtype(dtype)),
                                {{layout.relu(0), j, u + 1.0, bab::Split::Side::kBelow}}, 0),
        InvalidArgument);
  }
}

// A property between α-CROWN's bound and the sampled minimum of a Tanh network (no ReLU): ReLU
// splitting alone had nothing to split and stopped at the root; splitting Tanh inputs at points,
// with β on each split constraint and each domain's own Tanh α, proves it (13 rounds, 321
// domains when written; 37 rounds and 8,305 domains without the α; without the β term the worst
// bound stayed at -0.004 after 200 rounds).
TEST(GeneralBab, ProvesATanhPropertyAlphaCrownLeavesOpen) {
  const std::vector<Layer> layers = random_layers({5, 20, 20, 1}, 12);
  const BoundGraph g = tanh_net(layers, at::kFloat, false);
  at::Generator gen = at::detail::createCPUGenerator(12);
  const InputBox box = box_around(gen, 5, 0.5);
  const OpenProperty open = open_property(g, box, gen, 0.5);
  ASSERT_LT(open.alpha_lower, open.minimum);
  const io::VnnlibProperty& p = open.property;
  const auto objs = objectives(p.cases[0], 1);
  bab::BabOptions o;
  o.deterministic = true;
  o.max_rounds = 200;
  const bab::BabResult r =
      bab::relu_bab(o, context_of(bab::Deadline(0)), g, {p.cases[0], objs[0], objs});
  EXPECT_EQ(status(r), "proved") << r.reason << " after " << r.rounds << " rounds, "
                                 << r.domains_bounded << " domains, worst " << r.worst_value;
  EXPECT_GT(r.rounds, 0);
}

}  // namespace
}  // namespace distcrown
