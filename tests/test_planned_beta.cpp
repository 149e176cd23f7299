// β-CROWN's planned passes (methods/planned_beta.hpp) against the reference path they replace
// (CrownEngine with bab/relu_bounding.cpp's hook and autograd): one domain's bound under splits
// after 0, 1 and 20 α/β steps, in float32 and float64; each domain's bits and steps independent of
// its batch; the graphs it refuses, with their reason; and a search with it against a search
// without it. Soundness of the bounds it gives by sampling: test_relu_bounding.cpp, whose
// chains run planned by default.
#include <string>
#include <vector>

#include "bab_testing.hpp"
#include "methods/planned_beta.hpp"
#include "ops/add_sub.hpp"
#include "ops/conv.hpp"
#include "random_net.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

bab::BabOptions with_passes(bab::PassPath path) {
  bab::BabOptions o;
  o.passes = path;
  o.lr_beta = 0.5;  // β away from 0 quickly
  return o;
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const at::Tensor ad = a.to(at::kDouble);
  const at::Tensor bd = b.to(at::kDouble);
  const double err = ((ad - bd).abs() / bd.abs().clamp_min(1.0)).max().item<double>();
  EXPECT_LE(err, tol) << what << ": " << ad << " vs " << bd;
}

class PlannedBetaDtype : public ::testing::TestWithParam<at::ScalarType> {};

// Split domains of a 3-hidden-layer MLP: the planned bound equals the reference's to rounding
// after 0 steps (one pass), 1 and 20 (the closed-form gradients and Adam against autograd's).
TEST_P(PlannedBetaDtype, AgreesWithTheReferencePath) {
  const at::ScalarType dtype = GetParam();
  const double tol = dtype == at::kFloat ? 1e-4 : 1e-9;
  const std::vector<Layer> layers = random_layers({4, 20, 20, 12, 3}, 21);
  const Net net = build(layers, dtype);
  at::Generator gen = at::detail::createCPUGenerator(5);
  const InputBox box0 = box_around(gen, 4, 0.6);
  const InputBox box{box0.lower.to(dtype), box0.upper.to(dtype)};
  const at::Tensor C = at::randn({2, 3}, gen, at::TensorOptions().dtype(dtype));
  CrownEngine engine(net.graph, box, {});
  engine.compute_intermediate_bounds();
  const at::Tensor x = uniform_points(gen, box0, 4000);
  const std::vector<at::Tensor> z = pre_activations(layers, x);
  const auto j0 = unstable_neurons(engine.bounds(net.pres[0]), z[0], 2);
  const auto j1 = unstable_neurons(engine.bounds(net.pres[1]), z[1], 1);
  ASSERT_EQ(j0.size(), 2u);
  ASSERT_EQ(j1.size(), 1u);
  const std::vector<std::vector<bab::Split>> cases{
      {},
      {bab::relu_split(net.relus[0], j0[0], false)},
      {bab::relu_split(net.relus[1], j1[0], true)},
      {bab::relu_split(net.relus[0], j0[0], true), bab::relu_split(net.relus[0], j0[1], false),
       bab::relu_split(net.relus[1], j1[0], false)},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    for (const int steps : {0, 1, 20}) {
      SCOPED_TRACE("case " + std::to_string(k) + ", " + std::to_string(steps) + " steps");
      const at::Tensor want = lower_bound_with_splits(net.graph, box, C, cases[k], steps,
                                                      with_passes(bab::PassPath::kReference));
      const at::Tensor got = lower_bound_with_splits(net.graph, box, C, cases[k], steps,
                                                     with_passes(bab::PassPath::kPlanned));
      EXPECT_EQ(got.scalar_type(), dtype);
      expect_close(got, want, tol, "the lower bounds");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PlannedBetaDtype, ::testing::Values(at::kFloat, at::kDouble),
                         [](const auto& info) {
                           return std::string(info.param == at::kFloat ? "Float32" : "Float64");
                         });

// A batch of random domains (bounds, split marks, α in [0, 1], β >= 0) for `net`'s ReLUs.
struct RandomBatch {
  std::vector<at::Tensor> lower, upper, split, alpha, beta;
  [[nodiscard]] SplitBatchView view(int64_t B) const {
    return {B, &lower, &upper, &split, &alpha, &beta};
  }
};

RandomBatch random_batch(const Net& net, int64_t B, int64_t K, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  RandomBatch r;
  for (const int pre : net.pres) {
    const int64_t n = net.graph.node_numel(pre);
    const at::Tensor mid = at::randn({B, n}, gen, opts);
    const at::Tensor half = at::rand({B, n}, gen, opts);
    r.lower.push_back(mid - half);
    r.upper.push_back(mid + half);
    r.split.push_back(at::randint(-1, 2, {B, n}, gen, opts));
    r.alpha.push_back(at::rand({K, B, n}, gen, opts));
    r.beta.push_back(at::rand({K, B, n}, gen, opts));
  }
  return r;
}

// A domain bounded and stepped with others and alone: the same bits, in its bounds, its α and β
// after three steps, and its recorded coefficients.
TEST(PlannedBeta, EachDomainIndependentOfTheBatch) {
  const Net net = build(random_layers({6, 24, 24, 24, 4}, 31));
  at::Generator gen = at::detail::createCPUGenerator(32);
  const InputBox box = box_around(gen, 6, 0.5);
  const at::Tensor C = at::randn({3, 4}, gen);
  const int64_t B = 7;
  const int64_t K = 3;
  const RandomBatch batch = random_batch(net, B, K, 33);
  std::string why;
  const auto run = [&](const std::vector<int64_t>& active, std::vector<at::Tensor>& alpha,
                       std::vector<at::Tensor>& beta, at::Tensor& input_A) {
    const auto plan = PlannedBeta::plan(net.graph, C, box, why);
    EXPECT_NE(plan, nullptr) << why;
    plan->load(batch.view(B), true);
    for (int s = 0; s < 3; ++s) {
      plan->pass(active, false);
      plan->step(0.1, 0.5);
    }
    const at::Tensor lb = plan->pass(active, true);
    for (const at::Tensor& t : batch.alpha) alpha.push_back(at::empty_like(t));
    for (const at::Tensor& t : batch.beta) beta.push_back(at::empty_like(t));
    plan->alpha_beta(alpha, beta);
    input_A = plan->input_A();
    return lb;
  };
  std::vector<at::Tensor> alpha_all;
  std::vector<at::Tensor> beta_all;
  at::Tensor in_all;
  const at::Tensor all = run({0, 1, 2, 3, 4, 5, 6}, alpha_all, beta_all, in_all);
  for (const int64_t b : {0, 3, 6}) {
    SCOPED_TRACE("domain " + std::to_string(b));
    std::vector<at::Tensor> alpha;
    std::vector<at::Tensor> beta;
    at::Tensor in;
    const at::Tensor alone = run({b}, alpha, beta, in);
    EXPECT_TRUE(at::equal(alone[0], all[b])) << alone[0] << all[b];
    EXPECT_TRUE(at::equal(in.select(1, b), in_all.select(1, b)));
    for (size_t j = 0; j < alpha.size(); ++j) {
      EXPECT_TRUE(at::equal(alpha[j].select(1, b), alpha_all[j].select(1, b))) << "relu " << j;
      EXPECT_TRUE(at::equal(beta[j].select(1, b), beta_all[j].select(1, b))) << "relu " << j;
    }
  }
}

TEST(PlannedBeta, RefusesWhatItDoesNotCompute) {
  testing::Rng rng(41);
  const at::Tensor C = at::eye(2);
  std::string why;
  {  // a residual connection
    testing::Net n({1, 4}, rng);
    const int a = n.linear(n.input(), 4);
    const int r = n.relu(a);
    const int s = n.add(ops::make_add(), {r, a});
    const BoundGraph g = n.finish(n.linear(s, 2));
    const InputBox box{at::zeros({1, 4}), at::ones({1, 4})};
    EXPECT_EQ(PlannedBeta::plan(g, C, box, why), nullptr);
    EXPECT_NE(why.find("feeds 2 nodes"), std::string::npos) << why;
  }
  {  // a convolution, whose dense matrix holds far more than its kernel
    testing::Net n({1, 2, 12, 12}, rng);
    int x = n.relu(n.conv(n.input(), 4, 3, ops::Conv2dOptions{{1, 1}, {1, 1}, {1, 1}}));
    x = n.linear(n.flatten(x), 2);
    const BoundGraph g = n.finish(x);
    const InputBox box{at::zeros({1, 2, 12, 12}), at::ones({1, 2, 12, 12})};
    EXPECT_EQ(PlannedBeta::plan(g, C, box, why), nullptr);
    EXPECT_NE(why.find("made dense would hold"), std::string::npos) << why;
  }
}

// The hard property, searched with planned passes and with the reference ones, deterministic:
// both prove it, in rounds.
TEST(PlannedBeta, SearchesAsTheReferencePath) {
  const HardProperty h = hard_property(0.95);
  ASSERT_LT(h.alpha_lower, h.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  const auto objs = objectives(h.property.cases[0], 1);
  std::vector<bab::BabResult> results;
  for (const bab::PassPath path : {bab::PassPath::kPlanned, bab::PassPath::kReference}) {
    bab::BabOptions o;
    o.passes = path;
    o.deterministic = true;
    const bab::Deadline deadline(60);
    results.push_back(
        bab::relu_bab(o, context_of(deadline), h.net.graph, {h.property.cases[0], objs[0], objs}));
    EXPECT_EQ(status(results.back()), "proved") << results.back().reason;
    EXPECT_GE(results.back().rounds, 1);
  }
  EXPECT_TRUE(results[0].planned);
  EXPECT_GT(results[0].pass_flops, 0);
  EXPECT_FALSE(results[1].planned);
}

}  // namespace
}  // namespace distcrown
