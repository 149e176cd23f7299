// Input splitting (bab::input_bab): proving what CROWN alone cannot, the split score, clipping
// boxes to where a counterexample can be, and a counterexample in a small region; properties of
// many small boxes screened by one CROWN pass over all of them (bab::screen_cases).

#include "bab/case_screen.hpp"
#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

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
  const bab::BabResult b = bab::input_bab(bab::BabOptions{}, context_of(deadline), net.graph,
                                          {p.cases[0], objs[0], objs});
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
}

// The split score is the looseness Σ_k |A_ki|·radius_i: neither the widest dimension (2) nor the
// one with the largest coefficient of one row (0) but the one that adds the most to all rows (1).
TEST(InputSplitScore, ChoosesTheDimensionThatAddsTheMostLooseness) {
  const auto d = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor A = at::tensor({3.0, 2.0, 0.1, 0.0, 2.0, 0.1}, d).reshape({1, 2, 3});
  const at::Tensor radius = at::tensor({0.5, 0.5, 1.0}, d).reshape({1, 3});
  const at::Tensor proved = at::zeros({1, 2}, d);  // no deficit: the widths do not count
  const at::Tensor root = at::ones({3}, d);
  const at::Tensor score = bab::input_split_scores(A, radius, proved, root);
  EXPECT_EQ(score.argmax(1).item<int64_t>(), 1) << score;
  EXPECT_NEAR(score[0][1].item<double>(), 2.0, 1e-6);  // (2 + 2) · 0.5
  // Dimensions no row depends on: the widest.
  const at::Tensor flat = bab::input_split_scores(at::zeros({1, 2, 3}, d), radius, proved, root);
  EXPECT_EQ(flat.argmax(1).item<int64_t>(), 2) << flat;
}

// A box whose gap its linear bound's spread cannot explain (A ≈ 0 in a wide dimension, the
// others a few ulps wide): the dimension that spans the most of its root width, not one the
// linear bound leans on. A gap the spread explains: where the linear bound leans.
TEST(InputSplitScore, SplitsAWideDimensionTheLinearBoundHides) {
  const auto d = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor A = at::tensor({200.0, 1e-7, 150.0}, d).reshape({1, 1, 3});
  const at::Tensor radius = at::tensor({3e-8, 0.125, 3e-8}, d).reshape({1, 3});
  const at::Tensor root = at::tensor({0.04, 0.5, 0.5}, d);
  const at::Tensor gap = at::tensor({-0.0047}, d).reshape({1, 1});  // spread ~1e-5
  EXPECT_EQ(bab::input_split_scores(A, radius, gap, root).argmax(1).item<int64_t>(), 1);
  const at::Tensor spread = at::tensor({0.2, 0.25, 0.3}, d).reshape({1, 3});  // spread 85
  EXPECT_EQ(bab::input_split_scores(A, spread, gap, root).argmax(1).item<int64_t>(), 2);
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
  const bab::BabResult b =
      bab::input_bab(o, context_of(deadline), net.graph, {p.cases[0], objs[0], objs});
  ASSERT_EQ(status(b), "falsified") << b.reason;
  ASSERT_TRUE(b.counterexample.has_value());
  EXPECT_LE(b.counterexample->y.at(0), minimum + 1e-4);
  EXPECT_TRUE(inside(b.counterexample->x, p.cases[0]));
}

// nn4sys lindex's shape: many cases, each a small box of its own, [c − 0.005, c + 0.005]², with
// rows on y = f(x). `offset` places case i's threshold: kind 0 unsafe y <= f(c) − offset, kind 1
// unsafe y >= f(c) + offset, kind 2 both (a disjunction).
io::VnnlibProperty many_boxes(const BoundGraph& g, int64_t n, double offset) {
  io::VnnlibProperty p;
  p.source = "<test>";
  p.num_inputs = 2;
  p.num_outputs = 1;
  for (int64_t i = 0; i < n; ++i) {
    const double t = double(i) / double(n);
    const at::Tensor c = at::tensor({-0.9 + 1.8 * t, 0.8 * std::sin(7.0 * t)}, at::kDouble);
    c10::NoGradGuard no_grad;
    const double y = g.forward(c.reshape({1, 2}).to(g.dtype())).item<double>();
    const io::OutputConjunction below{{{{1.0}, y - offset}}};
    const io::OutputConjunction above{{{{-1.0}, -(y + offset)}}};
    std::vector<io::OutputConjunction> d;
    if (i % 3 != 1) d.push_back(below);
    if (i % 3 != 0) d.push_back(above);
    p.cases.push_back(case_of({c.reshape({1, 2}) - 0.005, c.reshape({1, 2}) + 0.005}, d));
  }
  return p;
}

TEST(CaseScreen, ProvesTheCasesItBoundsOnlyWhenTrueAndVerifyAnswersFromIt) {
  const std::vector<Layer> layers = random_layers({2, 16, 16, 1}, 9);
  Net net = build(layers, at::kDouble);
  // Thresholds 0.3 from the centre's value: every case true, nearly all proved by CROWN; at
  // 1e-4 some cases are open (or false) and must stay unproved unless sampling agrees.
  for (const double offset : {0.3, 1e-4}) {
    SCOPED_TRACE(offset);
    const io::VnnlibProperty p = many_boxes(net.graph, 120, offset);
    std::vector<std::vector<bab::Objective>> objs;
    for (const io::VnnlibCase& c : p.cases) objs.push_back(objectives(c, 1, at::kDouble));
    const std::vector<bool> proved =
        bab::screen_cases(net.graph, p, objs, BoundOptions{}, PassContext{});
    int64_t n_proved = 0;
    at::Generator gen = at::detail::createCPUGenerator(3);
    for (size_t i = 0; i < p.cases.size(); ++i) {
      if (!proved[i]) continue;
      ++n_proved;
      const io::VnnlibCase& c = p.cases[i];
      const at::Tensor lo = at::tensor(c.input_lower, at::kDouble);
      const at::Tensor hi = at::tensor(c.input_upper, at::kDouble);
      const at::Tensor x = lo + at::rand({200, 2}, gen, at::kDouble) * (hi - lo);
      c10::NoGradGuard no_grad;
      const at::Tensor y = net.graph.forward(x).reshape({-1});
      for (const io::OutputConjunction& d : c.disjuncts) {
        const io::LinearConstraint& k = d.constraints[0];
        EXPECT_TRUE((y * k.coeffs[0] > k.rhs).all().item<bool>()) << "case " << i;
      }
    }
    if (offset > 0.1) {
      EXPECT_EQ(n_proved, int64_t(p.cases.size()));
      bab::VerifyOptions o;
      o.timeout_s = 30;
      o.bab.progress = false;
      const bab::VerifyResult r = bab::verify(net.graph, p, o);
      EXPECT_EQ(bab::to_string(r.verdict), "unsat") << r.detail;
      EXPECT_EQ(r.detail.rfind("CROWN on every case's box", 0), 0u) << r.detail;
      // One case more whose centre is a counterexample: sat, found in that case's box.
      io::VnnlibProperty q = p;
      io::VnnlibCase open = q.cases[7];
      open.disjuncts = {{{{{1.0}, 1e3}}}};
      q.cases.push_back(open);
      const bab::VerifyResult s = bab::verify(net.graph, q, o);
      ASSERT_EQ(bab::to_string(s.verdict), "sat") << s.detail;
      ASSERT_TRUE(s.counterexample.has_value());
      EXPECT_TRUE(inside(s.counterexample->x, open));
    } else {
      EXPECT_LT(n_proved, int64_t(p.cases.size()));
    }
  }
}

}  // namespace
}  // namespace distcrown
