// Branch and bound through general nonlinearities (OpTraits::splits_anywhere) and products
// (OpTraits::splits_operands): which nodes the layout splits, the children of a split at a point
// inside an element's interval (sound by sampling, in float32 and float64), and properties that
// α-CROWN leaves open, proved by splitting Tanh inputs or a product's operands.
#include <functional>

#include "bab/branch_points.hpp"
#include "bab/branching.hpp"
#include "bab/relu_layout.hpp"
#include "bab_testing.hpp"
#include "ops/add_sub.hpp"
#include "ops/bilinear.hpp"
#include "ops/convex.hpp"
#include "ops/gelu.hpp"
#include "ops/power.hpp"
#include "ops/reshape.hpp"
#include "ops/s_shaped.hpp"
#include "ops/trig.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;
using testing::fmt;

using Activation = NodePtr (*)();

// Linear -> activation for every layer but the last, then Linear; a ReLU after the first
// activation's input as well when `relu_beside` (the same input feeds both).
BoundGraph activation_net(const std::vector<Layer>& layers, at::ScalarType dtype, bool relu_beside,
                          Activation activation) {
  GraphBuilder b({1, layers.front().W.size(1)});
  int x = b.input();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const int z = b.add(
        "fc" + std::to_string(i),
        ops::make_linear(make_param(l.W.to(at::kFloat)), make_param(l.b.to(at::kFloat))), {x});
    x = z;
    if (i + 1 == layers.size()) break;
    x = b.add("act" + std::to_string(i), activation(), {z});
    if (relu_beside && i == 0) {
      const int r = b.add("relu_beside", ops::make_relu(), {z});
      x = b.add("sum", ops::make_add(), {x, r});
    }
  }
  BoundGraph g = std::move(b).finish(x);
  g.to_dtype(dtype);
  return g;
}

BoundGraph tanh_net(const std::vector<Layer>& layers, at::ScalarType dtype, bool relu_beside) {
  return activation_net(layers, dtype, relu_beside, &ops::make_tanh);
}

// Two Linear layers of the input, their product (elementwise [1, 8] · [1, 8], or a MatMul
// [1, 2, 4] · [1, 4, 2]), then Linear to one output: no ReLU, nothing to split but the operands.
BoundGraph product_net(at::ScalarType dtype, bool matmul) {
  const std::vector<Layer> a = random_layers({5, 8}, 21);
  const std::vector<Layer> b = random_layers({5, 8}, 22);
  const std::vector<Layer> out = random_layers({matmul ? 4 : 8, 1}, 23);
  GraphBuilder g({1, 5});
  const int x = g.input();
  const auto fc = [&](const std::string& name, const Layer& l, int from) {
    return g.add(name,
                 ops::make_linear(make_param(l.W.to(at::kFloat)), make_param(l.b.to(at::kFloat))),
                 {from});
  };
  int left = fc("a", a[0], x);
  int right = fc("b", b[0], x);
  int product = 0;
  if (matmul) {
    left = g.add("a_nk", ops::make_reshape({2, 4}), {left});
    right = g.add("b_km", ops::make_reshape({4, 2}), {right});
    product = g.add("matmul", ops::make_bilinear_matmul(), {left, right});
    product = g.add("flat", ops::make_reshape({4}), {product});
  } else {
    product = g.add("mul", ops::make_bilinear_mul(), {left, right});
  }
  BoundGraph net = std::move(g).finish(fc("out", out[0], product));
  net.to_dtype(dtype);
  return net;
}

NodePtr make_square() { return ops::make_pow(2); }
NodePtr make_cube() { return ops::make_pow(3); }

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

TEST(GeneralBab, LayoutSplitsEachOperandOfAProduct) {
  for (const bool matmul : {false, true}) {
    const BoundGraph g = product_net(at::kFloat, matmul);
    const bab::detail::ReluLayout layout(g);
    ASSERT_EQ(layout.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(layout.general(r) && layout.operand(r) && !layout.has_alpha(r));
      EXPECT_EQ(layout.input(r), int(r));
      EXPECT_EQ(layout.relu(r), layout.relu(0));
      EXPECT_EQ(layout.index_of(layout.relu(0), int(r)), r);
    }
    EXPECT_TRUE(layout.other_pre().empty());
  }
}

// Both children of a split of entry r's widest element, at its midpoint and at its branch point
// (tabulated or the midpoint), bound Y_0 from below over their part of the box: every sampled
// input whose split tensor lies on the child's side has its output at or above the child's
// bound; with α/β steps as without; in float32 and float64.
void expect_children_sound(const std::function<BoundGraph(at::ScalarType)>& net, size_t r,
                           bool at_midpoint_too) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(dtype == at::kFloat ? "float32" : "float64");
    const BoundGraph g = net(dtype);
    at::Generator gen = at::detail::createCPUGenerator(12);
    const InputBox cpu = box_around(gen, 5, 0.5);
    const InputBox box{cpu.lower.to(dtype), cpu.upper.to(dtype)};
    const bab::detail::ReluLayout layout(g);
    const int pre = layout.pre(r);
    CrownEngine engine(g, box, BoundOptions{});
    engine.compute_intermediate_bounds();
    const Interval in = engine.bounds(pre);
    const int64_t j = (in.upper - in.lower).reshape({-1}).argmax().item<int64_t>();
    const double l = in.lower.reshape({-1})[j].item<double>();
    const double u = in.upper.reshape({-1})[j].item<double>();
    bab::detail::BranchPoints table(g, layout);
    const at::Tensor x = uniform_points(gen, box, 20000);
    const std::vector<at::Tensor> values = g.forward_values(x);
    const at::Tensor z = values[size_t(pre)].reshape({x.size(0), -1}).select(1, j);
    const at::Tensor y = values[size_t(g.output())].reshape({-1});
    std::vector<std::optional<double>> points{table.point(r, l, u, dtype)};
    if (at_midpoint_too) points.push_back(bab::split_midpoint(l, u, dtype));
    for (const std::optional<double> p : points) {
      ASSERT_TRUE(p.has_value());
      SCOPED_TRACE("split at " + fmt(*p));
      for (const bool above : {false, true}) {
        const bab::Split s{layout.relu(r), j, *p,
                           above ? bab::Split::Side::kAbove : bab::Split::Side::kBelow,
                           layout.input(r)};
        const at::Tensor side = above ? z >= *p : z <= *p;
        ASSERT_GT(side.sum().item<int64_t>(), 100) << "too few samples on the side";
        const double sampled = y.masked_select(side).min().item<double>();
        for (const int iterations : {0, 5}) {
          const double lb =
              lower_bound_with_splits(g, box, at::eye(1, at::TensorOptions().dtype(dtype)), {s},
                                      iterations)
                  .item<double>();
          EXPECT_LE(lb, sampled + kTol * std::max(1.0, std::abs(sampled)))
              << (above ? "above" : "below") << ", " << iterations << " iterations: bound "
              << fmt(lb) << " over the sampled minimum " << fmt(sampled);
        }
      }
    }
    EXPECT_THROW(lower_bound_with_splits(
                     g, box, at::eye(1, at::TensorOptions().dtype(dtype)),
                     {{layout.relu(r), j, u + 1.0, bab::Split::Side::kBelow, layout.input(r)}}, 0),
                 InvalidArgument);
  }
}

void expect_children_sound(Activation activation, bool at_midpoint_too) {
  const std::vector<Layer> layers = random_layers({5, 20, 20, 1}, 12);
  expect_children_sound(
      [&](at::ScalarType dtype) { return activation_net(layers, dtype, false, activation); }, 0,
      at_midpoint_too);
}

TEST(GeneralBab, ChildrenOfAPointSplitAreSoundBySampling) {
  expect_children_sound(&ops::make_tanh, true);
}

TEST(GeneralBab, ChildrenOfAnOperandSplitAreSoundBySampling) {
  for (const bool matmul : {false, true}) {
    for (const size_t r : {0u, 1u}) {
      SCOPED_TRACE(std::string(matmul ? "MatMul" : "Mul") + ", operand " + std::to_string(r));
      expect_children_sound([&](at::ScalarType t) { return product_net(t, matmul); }, r, false);
    }
  }
}

// The same for the other split kinds, at the branch point only (full tier: minutes; GELU, Sin and
// Cos take most of it).
TEST(GeneralBab, ChildrenOfEverySplitKindAreSoundBySampling) {
  const std::vector<std::pair<const char*, Activation>> kinds{
      {"Sigmoid", &ops::make_sigmoid}, {"Erf", &ops::make_erf}, {"Exp", &ops::make_exp},
      {"GELU", &ops::make_gelu},       {"Sin", &ops::make_sin}, {"Cos", &ops::make_cos},
      {"x^2", &make_square},           {"x^3", &make_cube}};
  for (const auto& [name, activation] : kinds) {
    SCOPED_TRACE(name);
    expect_children_sound(activation, false);
  }
}

// The tabulated branch points (GenBaB's optimised points): a table for each function defined on
// the whole grid, no entry where the relaxation is not finite (Reciprocal across 0); on the
// grid's intervals, whose table entry is exact, the point is strictly inside and its children's
// relaxations enclose no more area than the midpoint's (the midpoint is one of the candidates);
// off the grid, the midpoint.
TEST(GeneralBab, BranchPointsNeverEncloseMoreAreaThanTheMidpoint) {
  using bab::detail::BranchPointTable;
  const NodePtr reciprocal = ops::make_reciprocal();
  BranchPointTable across_zero(*reciprocal);
  EXPECT_FALSE(across_zero.ratio(-1.0, 1.0).has_value());
  const BoundGraph g = tanh_net(random_layers({3, 8, 8, 1}, 4), at::kFloat, false);
  const bab::detail::ReluLayout layout(g);
  bab::detail::BranchPoints points(g, layout);
  ASSERT_TRUE(points.optimised(0));
  EXPECT_EQ(points.point(0, -7.0, 7.0, at::kDouble), 0.0);  // off the grid: the midpoint
  for (const NodePtr& op : {ops::make_tanh(), ops::make_erf(), ops::make_exp()}) {
    SCOPED_TRACE(op->op_type());
    BranchPointTable table(*op);
    at::Generator gen = at::detail::createCPUGenerator(3);
    const at::Tensor ij = std::get<0>(at::randint(101, {2, 300}, gen, at::kLong).sort(0));
    std::vector<double> l, p, m, u;
    for (int64_t k = 0; k < ij.size(1); ++k) {
      const int64_t i = ij[0][k].item<int64_t>();
      const int64_t j = ij[1][k].item<int64_t>();
      if (i == j) continue;
      l.push_back(BranchPointTable::kLow + double(i) * BranchPointTable::kStep);
      u.push_back(BranchPointTable::kLow + double(j) * BranchPointTable::kStep);
      const std::optional<double> r = table.ratio(l.back(), u.back());
      ASSERT_TRUE(r.has_value());
      ASSERT_GT(*r, 0.0);
      ASSERT_LT(*r, 1.0);
      p.push_back(l.back() + *r * (u.back() - l.back()));
      m.push_back((l.back() + u.back()) / 2);
    }
    const auto t = [](const std::vector<double>& v) {
      return at::tensor(v, at::TensorOptions().dtype(at::kDouble));
    };
    // One batch for both: the S-shaped relaxations' tangent points are found to a precision
    // that depends on the batch, which moves an area by up to ~0.5 % from one batch to another.
    const int64_t n = int64_t(l.size());
    const at::Tensor both = BranchPointTable::children_area(
        *op, at::cat({t(l), t(l)}), at::cat({t(p), t(m)}), at::cat({t(u), t(u)}));
    const at::Tensor at_point = both.slice(0, 0, n);
    const at::Tensor at_mid = both.slice(0, n);
    EXPECT_TRUE((at_point <= at_mid * (1 + 1e-2) + 1e-9).all().item<bool>())
        << "worst excess " << fmt((at_point - at_mid).max().item<double>());
    EXPECT_TRUE((at_point >= -1e-9).all().item<bool>());
  }
}

// A property of `g` between α-CROWN's bound and the sampled minimum over a box of its 5 inputs
// is proved by branch and bound within 200 rounds, after at least one.
void expect_proved_past_alpha_crown(const BoundGraph& g) {
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

// A Tanh network (no ReLU): ReLU splitting alone had nothing to split and stopped at the root;
// splitting Tanh inputs at points, with β on each split constraint and each domain's own Tanh α,
// proves it (13 rounds, 321 domains when written; 37 rounds and 8,305 domains without the α;
// without the β term the worst bound stayed at -0.004 after 200 rounds).
TEST(GeneralBab, ProvesATanhPropertyAlphaCrownLeavesOpen) {
  expect_proved_past_alpha_crown(tanh_net(random_layers({5, 20, 20, 1}, 12), at::kFloat, false));
}

// A product of two Linear layers (no ReLU, no other nonlinearity): proved by splitting the
// product's operands.
TEST(GeneralBab, ProvesAProductPropertyAlphaCrownLeavesOpen) {
  for (const bool matmul : {false, true}) {
    SCOPED_TRACE(matmul ? "MatMul" : "Mul");
    expect_proved_past_alpha_crown(product_net(at::kFloat, matmul));
  }
}

}  // namespace
}  // namespace distcrown
