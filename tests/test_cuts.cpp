// Cuts from verified subproblems (src/bab/cut_pool.hpp, BabOptions::cuts): the pool's clauses
// over a domain's decisions (pruned inside a nogood, a split forced inside all but one of its
// decisions, nothing otherwise, to a fixpoint), the decisions a domain's splits and β give, and
// searches with cuts that prove what is true and never prove what a planted counterexample
// makes false.

#include "bab/cut_pool.hpp"
#include "bab/input_bab.hpp"
#include "bab/relu_domain.hpp"
#include "bab/relu_layout.hpp"
#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;
using bab::detail::CutPool;
using bab::detail::Decision;
using bab::detail::Domain;

// A 3-4-4-1 network's two ReLU layers (flat neurons 0-3 and 4-7), every neuron in [-1, 1]
// unless `fixed` gives (flat neuron, lower, upper).
struct SmallSearch {
  Net net = build(random_layers({3, 4, 4, 1}, 3));
  bab::detail::ReluLayout layout{net.graph};

  Domain root(const std::vector<std::tuple<int64_t, double, double>>& fixed = {}) const {
    std::vector<Interval> bounds;
    for (int r = 0; r < 2; ++r) {
      bounds.push_back({at::full({1, 4}, -1.0), at::full({1, 4}, 1.0)});
    }
    for (const auto& [n, l, u] : fixed) {
      bounds[size_t(n / 4)].lower[0][n % 4] = l;
      bounds[size_t(n / 4)].upper[0][n % 4] = u;
    }
    return bab::detail::make_root(net.graph, layout, 1, bounds, {});
  }
  [[nodiscard]] bab::Split split(int64_t neuron, bool active) const {
    return bab::relu_split(net.relus[size_t(neuron / 4)], neuron % 4, active);
  }
  [[nodiscard]] Domain with(const Domain& d, int64_t neuron, bool active) const {
    return bab::detail::child(d, layout, split(neuron, active), d.id + 1);
  }
};

void expect_split(const bab::Split& got, const bab::Split& want) {
  EXPECT_EQ(got.node, want.node);
  EXPECT_EQ(got.element, want.element);
  EXPECT_EQ(got.side, want.side);
}

TEST(Cuts, NogoodsPruneAndSplitAsClauses) {
  const SmallSearch s;
  const Domain root = s.root();
  CutPool pool(s.layout, root);
  pool.add({{5, -1}, {1, +1}});  // neuron 1 active and neuron 5 inactive hold no violation
  EXPECT_EQ(pool.size(), 1u);
  pool.add({{1, +1}, {5, -1}});  // the same, in another order
  EXPECT_EQ(pool.size(), 1u);

  const bab::detail::Propagation open = pool.propagate(root);  // two decisions open
  EXPECT_FALSE(open.pruned);
  EXPECT_TRUE(open.implied.empty());

  const Domain one = s.with(root, 1, true);  // inside one decision: the other is negated
  const bab::detail::Propagation unit = pool.propagate(one);
  EXPECT_FALSE(unit.pruned);
  ASSERT_EQ(unit.implied.size(), 1u);
  expect_split(unit.implied[0], s.split(5, true));

  EXPECT_TRUE(pool.propagate(s.with(one, 5, false)).pruned);  // inside both

  const bab::detail::Propagation outside = pool.propagate(s.with(root, 1, false));
  EXPECT_FALSE(outside.pruned);
  EXPECT_TRUE(outside.implied.empty());

  // A decision held by the bounds alone (neuron 5's interval below 0) counts as one held by a
  // split.
  const bab::detail::Propagation by_bounds = pool.propagate(s.root({{5, -1.0, -0.5}}));
  ASSERT_EQ(by_bounds.implied.size(), 1u);
  expect_split(by_bounds.implied[0], s.split(1, false));
  EXPECT_TRUE(pool.propagate(s.root({{5, -1.0, -0.5}, {1, 0.25, 1.0}})).pruned);

  // To a fixpoint: the forced split of neuron 5 makes a second nogood a unit too.
  pool.add({{5, +1}, {6, +1}});
  const bab::detail::Propagation chain = pool.propagate(one);
  ASSERT_EQ(chain.implied.size(), 2u);
  expect_split(chain.implied[0], s.split(5, true));
  expect_split(chain.implied[1], s.split(6, false));
}

TEST(Cuts, DecisionsAreTheSplitsAndTheUsedOnesHavePositiveBeta) {
  const SmallSearch s;
  Domain d = s.with(s.with(s.with(s.root(), 2, true), 4, false), 7, true);
  d.beta = {at::zeros({1, 1, 4}), at::zeros({1, 1, 4})};
  d.beta[0][0][0][2] = 0.5;   // neuron 2
  d.beta[1][0][0][3] = 1e-3;  // neuron 7
  const CutPool pool(s.layout, s.root());
  EXPECT_EQ(pool.decisions(d), (std::vector<Decision>{{2, +1}, {4, -1}, {7, +1}}));
  EXPECT_EQ(pool.decisions(d, true), (std::vector<Decision>{{2, +1}, {7, +1}}));
  // A domain made of decisions from the root: its splits and bounds, the warm start's α and β.
  const Domain made = pool.domain_of(s.root(), {{2, +1}, {7, +1}}, d);
  EXPECT_EQ(pool.decisions(made), (std::vector<Decision>{{2, +1}, {7, +1}}));
  EXPECT_EQ(made.lower[0][0][2].item<double>(), 0.0);
  EXPECT_EQ(made.upper[1][0][3].item<double>(), 1.0);
  EXPECT_TRUE(made.beta[0].equal(d.beta[0]));
}

// A search with cuts on a true property: proved, with nogoods learned and used (when written:
// 12 rounds, 65 checked, 5 learned, 3 domains pruned, 35 splits implied). The same network with
// a counterexample planted at an interior point, in a region no box corner reaches: never
// proved while the pool learns and prunes (100 rounds, 448 checked, 43 learned, 10 pruned, 158
// implied; unknown at the round limit).
TEST(Cuts, SearchesWithCutsProveTrueAndNeverFalseProperties) {
  const std::vector<Layer> layers = random_layers({5, 24, 24, 24, 1}, 31);
  const Net net = build(layers);
  at::Generator gen = at::detail::createCPUGenerator(31);
  const InputBox box = box_around(gen, 5, 0.5);
  const OpenProperty open = open_property(net.graph, box, gen, 0.6);
  ASSERT_LT(open.alpha_lower, open.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  bab::BabOptions o;
  o.cuts = true;
  o.deterministic = true;
  o.batch = 8;
  o.max_rounds = 400;
  const auto objs = objectives(open.property.cases[0], 1);
  const bab::BabResult proved = bab::relu_bab(o, context_of(bab::Deadline(0)), net.graph,
                                              {open.property.cases[0], objs[0], objs});
  EXPECT_EQ(status(proved), "proved") << proved.reason << ", worst " << proved.worst_value;
  EXPECT_GT(proved.cuts.learned, 0);
  EXPECT_GT(proved.cuts.pruned + proved.cuts.implied, 0);
  EXPECT_LE(proved.cuts.learned, proved.cuts.checked);

  // The same network less depth·relu(1 - |x - x*|_1 / w), the spike's neuron carried to the output
  // beside the network's (block diagonal layers; relu(t) = t for t >= 0): false in a small L1 ball
  // around x* (no box corner near it), the same function far from it.
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t n = 5;
  const double w = 0.1;
  const at::Tensor star = (box.lower + 0.37 * (box.upper - box.lower)).reshape({n}).to(at::kDouble);
  const auto beside = [&](const at::Tensor& a, const at::Tensor& b) {
    at::Tensor m = at::zeros({a.size(0) + b.size(0), a.size(1) + b.size(1)}, f64);
    m.narrow(0, 0, a.size(0)).narrow(1, 0, a.size(1)).copy_(a);
    m.narrow(0, a.size(0), b.size(0)).narrow(1, a.size(1), b.size(1)).copy_(b);
    return m;
  };
  const at::Tensor eye = at::eye(n, f64);
  const at::Tensor one = at::ones({1}, f64);
  std::vector<Layer> spiked{
      {at::cat({eye, -eye, layers[0].W}), at::cat({-star, star, layers[0].b})},
      {beside(at::full({1, 2 * n}, -1.0 / w, f64), layers[1].W), at::cat({one, layers[1].b})}};
  for (size_t i = 2; i + 1 < layers.size(); ++i) {
    spiked.push_back({beside(at::ones({1, 1}, f64), layers[i].W), at::cat({0 * one, layers[i].b})});
  }
  // Just deep enough: y(x*) - depth = rhs - 1e-3.
  at::Tensor y_star;
  {
    c10::NoGradGuard no_grad;
    y_star = net.graph.forward(star.reshape({1, n}).to(at::kFloat));
  }
  const double depth = y_star.item<double>() - open.rhs + 1e-3;
  spiked.push_back({at::cat({at::full({1, 1}, -depth, f64), layers.back().W}, 1), layers.back().b});
  const Net spike = build(spiked);
  {
    c10::NoGradGuard no_grad;
    ASSERT_LT(spike.graph.forward(star.reshape({1, n}).to(at::kFloat)).item<double>(), open.rhs)
        << "no counterexample planted at x*";
  }
  o.attack_every = 0;  // only the corners of the domains' linear bounds are checked
  o.max_rounds = 100;
  const bab::BabResult r = bab::relu_bab(o, context_of(bab::Deadline(0)), spike.graph,
                                         {open.property.cases[0], objs[0], objs});
  EXPECT_NE(status(r), "proved") << "a property false at an interior point was proved";
  EXPECT_GT(r.cuts.learned, 0) << status(r) << " after " << r.rounds << " rounds";
  EXPECT_GT(r.cuts.pruned + r.cuts.implied, 0);
}

// Cuts refuse what they cannot serve, in one line.
TEST(Cuts, InputSplittingRefusesThem) {
  const Net net = build(random_layers({2, 8, 1}, 5));
  at::Generator gen = at::detail::createCPUGenerator(5);
  const InputBox box = box_around(gen, 2, 0.5);
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, -100.0}}}});
  const auto objs = objectives(p.cases[0], 1);
  bab::BabOptions o;
  o.cuts = true;
  EXPECT_THROW(
      bab::input_bab(o, context_of(bab::Deadline(0)), net.graph, {p.cases[0], objs[0], objs}),
      InvalidArgument);
}

}  // namespace
}  // namespace distcrown
