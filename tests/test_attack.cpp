// The concrete counterexample check (bab::check_candidates) and the attack of a
// branch-and-bound round (bab::round_attack), bab/attack.hpp.

#include "bab_testing.hpp"
#include "onnx_builder.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

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
  const Checkpoint until{bab::Deadline(30)};
  const bab::AttackOptions once = bab::round_attack(root, 7);
  EXPECT_EQ(once.restarts, 16);
  EXPECT_EQ(once.seed, 10u);
  root.steps = 100;
  EXPECT_EQ(bab::round_attack(root, 7).steps, 30);
  root.steps = 0;
  int hits = 0;
  int misses = 0;
  for (int64_t round = 0; round < 40; ++round) {
    const bab::AttackOptions a = bab::round_attack(root, round);
    const auto cex = bab::pgd_attack(a, until, net.graph, p.cases[0], objs);
    const auto again = bab::pgd_attack(a, until, net.graph, p.cases[0], objs);
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

// Domain groups share a round's attack out: each group a part of the random starts, seeded apart,
// and of the worst domains' points; one group keeps the whole attack, seeded by the round alone.
TEST(RoundAttack, GroupsShareTheRoundsAttack) {
  bab::AttackOptions root;
  root.seed = 3;
  const bab::AttackOptions whole = bab::round_attack(root, 7, 0, 1);
  EXPECT_EQ(whole.restarts, 16);
  EXPECT_EQ(whole.seed, 10u);
  EXPECT_EQ(bab::round_attack_starts(1), 64);
  const bab::AttackOptions first = bab::round_attack(root, 7, 0, 2);
  const bab::AttackOptions second = bab::round_attack(root, 7, 1, 2);
  EXPECT_EQ(first.restarts, 8);
  EXPECT_EQ(second.restarts, 8);
  EXPECT_NE(first.seed, second.seed);
  EXPECT_NE(second.seed, bab::round_attack(root, 8, 0, 2).seed);
  EXPECT_EQ(bab::round_attack(root, 7, 2, 3).restarts, 6);
  EXPECT_EQ(bab::round_attack_starts(2), 32);
  EXPECT_EQ(bab::round_attack_starts(3), 22);
  EXPECT_THROW(bab::round_attack(root, 7, 2, 2), InvalidArgument);
  EXPECT_THROW(bab::round_attack(root, 7, 0, 0), InvalidArgument);
  EXPECT_THROW(bab::round_attack_starts(0), InvalidArgument);
}

// A network with a Sign layer has no gradient: PGD from the box's centre alone (no random
// starts) cannot move, and the random sign steps it takes instead (kept where the margin does not
// rise) reach the 3 % of the box where the unsafe output holds.
TEST(PgdAttack, MovesWithoutAGradientThroughSignLayers) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2}).output("y", {1, 1});
  at::Generator gen = at::detail::createCPUGenerator(4);
  b.initializer("W1", at::randn({8, 2}, gen)).initializer("b1", at::randn({8}, gen) * 0.5);
  b.initializer("W2", at::randn({1, 8}, gen)).initializer("b2", at::zeros({1}));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("sign", "Sign", {"h"}, {"s"});
  b.node("fc2", "Gemm", {"s", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "sign.onnx");
  const InputBox box{at::full({1, 2}, -1.0), at::full({1, 2}, 1.0)};
  double rhs = 0;
  {
    c10::NoGradGuard no_grad;
    const at::Tensor x = at::rand({4096, 2}, gen) * 2 - 1;
    rhs = at::quantile(g.forward(x).reshape({-1}), 0.03).item<double>();
    ASSERT_GT(g.forward(at::zeros({1, 2})).item<double>(), rhs) << "the centre holds already";
  }
  const io::VnnlibProperty p = property_of(box, 1, {{{{{1.0}, rhs}}}});
  bab::AttackOptions a;
  a.restarts = 0;
  a.steps = 100;
  const auto cex = bab::pgd_attack(a, Checkpoint{bab::Deadline(30)}, g, p.cases[0],
                                   objectives(p.cases[0], 1, at::kFloat));
  ASSERT_TRUE(cex.has_value());
  EXPECT_LE(cex->y.at(0), rhs);
  EXPECT_TRUE(inside(cex->x, p.cases[0]));
}

// Step functions (Sign, Floor, Ceil) keep their values under forward_surrogate and pass the
// gradient straight through: y = Σ w · Sign(x) has the surrogate gradient w.
TEST(PgdAttack, StepFunctionsPassTheGradientStraightThrough) {
  for (const std::string op : {"Sign", "Floor", "Ceil"}) {
    testing::OnnxBuilder b;
    b.input("x", {1, 3}).output("y", {1, 1});
    b.initializer("W", at::tensor({0.5F, -2.0F, 1.5F}).reshape({1, 3}));
    b.node("step", op, {"x"}, {"s"});
    b.node("fc", "Gemm", {"s", "W"}, {"y"}, {testing::attr_int("transB", 1)});
    const BoundGraph g = io::load_onnx_bytes(b.bytes(), "step.onnx");
    EXPECT_TRUE(g.has_surrogate_gradients()) << op;
    const at::Tensor x = at::tensor({0.3F, -1.7F, 2.2F}).reshape({1, 3}).requires_grad_(true);
    const at::Tensor y = g.forward_surrogate(x);
    EXPECT_TRUE(at::equal(y.detach(), g.forward(x.detach()))) << op;
    y.sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), at::tensor({0.5F, -2.0F, 1.5F}).reshape({1, 3}))) << op;
  }
}

// Sampling before PGD (AttackOptions::samples): vertices of the box reach a region no gradient
// leads to. y = Σ Sign(x_i − 0.9) over x ∈ [-1, 1]^8 is 8 only where every x_i > 0.9 (a
// 4e-11 share of the box, a 1/256 share of its vertices): unsafe y >= 7.5. PGD from the centre
// alone (no samples) has no gradient and random sign steps that keep y from rising; the
// samples' vertices find it.
TEST(PgdAttack, SampledVerticesReachACornerNoGradientLeadsTo) {
  testing::OnnxBuilder b;
  b.input("x", {1, 8}).output("y", {1, 1});
  b.initializer("shift", at::full({8}, 0.9F)).initializer("W", at::ones({1, 8}));
  b.node("sub", "Sub", {"x", "shift"}, {"h"});
  b.node("sign", "Sign", {"h"}, {"s"});
  b.node("sum", "Gemm", {"s", "W"}, {"y"}, {testing::attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "corner.onnx");
  const InputBox box{at::full({1, 8}, -1.0), at::full({1, 8}, 1.0)};
  const io::VnnlibProperty p = property_of(box, 1, {{{{{-1.0}, -7.5}}}});
  const auto objs = objectives(p.cases[0], 1, at::kFloat);
  bab::AttackOptions a;
  a.restarts = 16;
  a.steps = 10;
  const auto cex = bab::pgd_attack(a, Checkpoint{bab::Deadline(30)}, g, p.cases[0], objs);
  ASSERT_TRUE(cex.has_value());
  EXPECT_GE(cex->y.at(0), 7.5);
  EXPECT_TRUE(inside(cex->x, p.cases[0]));
  for (const double v : cex->x) EXPECT_GT(v, 0.9);
}

}  // namespace
}  // namespace distcrown
