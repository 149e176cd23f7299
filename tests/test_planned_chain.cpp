// The planned pass of input splitting (methods/planned_chain.hpp) against the reference path it
// replaces (CrownEngine under kTightUnstable, as bab/input_bab.cpp runs it), in float32 and
// float64; sound by sampling (the bound and its linear form at the input); each box's bits
// independent of the batch; the graphs it refuses, each with its reason; and a search with it
// equal to the search without it.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bab_testing.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/relaxation_hook.hpp"
#include "methods/planned_chain.hpp"
#include "ops/add_sub.hpp"
#include "ops/s_shaped.hpp"
#include "random_net.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

// Records the A of the output pass at the input (as bab/input_bab.cpp's hook does).
class InputA final : public RelaxationHook {
 public:
  explicit InputA(int output) : output_(output) {}
  RelaxParams params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                     std::span<const Interval* const> /*in*/) override {
    return {};
  }
  void observe(int start, int node, const BoundA& a) override {
    if (start == output_ && node == 0) A = a.lA;
  }
  [[nodiscard]] bool reads_rows() const override { return false; }
  at::Tensor A;  // [K, B, n]

 private:
  int output_;
};

BoundOptions tight_unstable() {
  BoundOptions o;
  o.scheme = IntermediateScheme::kTightUnstable;
  o.align_rows = false;
  return o;
}

// The reference path's bounds of boxes, as ChainBounds.
ChainBounds reference_bounds(const BoundGraph& g, const InputBox& box, const at::Tensor& C) {
  c10::NoGradGuard no_grad;
  const int64_t B = box.lower.size(0);
  const int64_t K = C.size(0);
  const int64_t m = g.output_numel();
  InputA hook(g.output());
  CrownEngine engine(g, box, tight_unstable());
  engine.set_hook(&hook);
  engine.compute_intermediate_bounds();
  const at::Tensor rows = C.to(g.dtype()).reshape({K, 1, m}).expand({K, B, m}).contiguous();
  ChainBounds r;
  r.crown_lower = engine.backward_from(g.output(), BoundA{rows, {}}).lower;
  r.ibp_lower = engine.output_ibp(C).lower;
  r.input_A = hook.A.reshape({K, B, -1}).permute({1, 0, 2});
  return r;
}

ChainBounds planned_bounds(const BoundGraph& g, const InputBox& box, const at::Tensor& C) {
  std::string why;
  const auto plan = PlannedChain::plan(g, C, tight_unstable(), why);
  EXPECT_NE(plan, nullptr) << why;
  if (plan == nullptr) return {};
  return plan->bound(box, Checkpoint{});
}

// B boxes of radii from 0.01 to 1 around random centres in [-1, 1]^n.
InputBox random_boxes(int64_t B, int64_t n, at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor centre = at::rand({B, n}, gen, opts) * 2 - 1;
  const at::Tensor radius = at::logspace(-2, 0, B, 10.0, opts).reshape({B, 1});
  return {(centre - radius).to(dtype), (centre + radius).to(dtype)};
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const at::Tensor ad = a.to(at::kDouble);
  const at::Tensor bd = b.to(at::kDouble);
  const double err = ((ad - bd).abs() / bd.abs().clamp_min(1.0)).max().item<double>();
  EXPECT_LE(err, tol) << what;
}

class PlannedChainDtype : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(PlannedChainDtype, AgreesWithTheReferencePath) {
  const at::ScalarType dtype = GetParam();
  const double tol = dtype == at::kFloat ? 2e-4 : 1e-10;
  const Net net = build(random_layers({5, 24, 24, 24, 6}, 3), dtype);
  const InputBox box = random_boxes(9, 5, dtype, 4);
  const at::Tensor C = at::tensor({1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.5, 0.0,
                                   0.0, 0.0, 0.0, 0.0, 0.0, -1.0},
                                  at::kDouble)
                           .reshape({3, 6});
  const ChainBounds want = reference_bounds(net.graph, box, C);
  const ChainBounds got = planned_bounds(net.graph, box, C);
  expect_close(got.crown_lower, want.crown_lower, tol, "CROWN's lower bounds");
  expect_close(got.ibp_lower, want.ibp_lower, tol, "IBP's lower bounds");
  expect_close(got.input_A, want.input_A, tol, "the coefficients at the input");
  EXPECT_EQ(got.crown_lower.scalar_type(), dtype);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PlannedChainDtype, ::testing::Values(at::kFloat, at::kDouble),
                         [](const auto& info) {
                           return std::string(info.param == at::kFloat ? "Float32" : "Float64");
                         });

// For every sampled x of a box: C·f(x) ≥ A·x + c ≥ the bound, where c makes the linear form's
// minimum over the box the bound (in double, with float32's slack).
TEST(PlannedChain, SoundBySampling) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const Net net = build(random_layers({4, 32, 32, 3}, 11), dtype);
    const InputBox box = random_boxes(6, 4, dtype, 12);
    const at::Tensor C = at::tensor({1.0, -1.0, 0.0, 0.0, 1.0, -1.0}, at::kDouble).reshape({2, 3});
    const ChainBounds got = planned_bounds(net.graph, box, C);
    at::Generator gen = at::detail::createCPUGenerator(13);
    for (int64_t b = 0; b < 6; ++b) {
      const InputBox one{box.lower.slice(0, b, b + 1).to(at::kDouble),
                         box.upper.slice(0, b, b + 1).to(at::kDouble)};
      const at::Tensor x = uniform_points(gen, one, 400);           // [N, n]
      const at::Tensor v = spec_outputs(net.graph, x, C);           // [N, K]
      const at::Tensor A = got.input_A[b].to(at::kDouble);          // [K, n]
      const at::Tensor lower = got.crown_lower[b].to(at::kDouble);  // [K]
      const at::Tensor centre = (one.lower + one.upper) / 2;
      const at::Tensor radius = (one.upper - one.lower) / 2;
      const at::Tensor c =
          lower - (at::matmul(centre, A.t()) - at::matmul(radius, A.abs().t())).reshape({-1});
      const at::Tensor linear = at::matmul(x, A.t()) + c;  // [N, K]
      expect_above(lower, v, "the bound");
      expect_above(at::zeros({1, 2}, at::kDouble), v - linear, "the linear bound");
    }
  }
}

// A box bounded with others, alone, and in another batch: the same bits.
TEST(PlannedChain, EachBoxIndependentOfTheBatch) {
  const Net net = build(random_layers({5, 40, 40, 40, 5}, 21));
  const InputBox box = random_boxes(40, 5, at::kFloat, 22);  // more than one pass's boxes
  const at::Tensor C = at::eye(5, at::kDouble).slice(0, 0, 4) - at::eye(5, at::kDouble).slice(0, 1);
  const ChainBounds all = planned_bounds(net.graph, box, C);
  const InputBox odd{box.lower.slice(0, 1, 40, 2), box.upper.slice(0, 1, 40, 2)};
  const ChainBounds odds = planned_bounds(net.graph, odd, C);
  for (int64_t b = 0; b < 40; ++b) {
    const InputBox one{box.lower.slice(0, b, b + 1), box.upper.slice(0, b, b + 1)};
    const ChainBounds alone = planned_bounds(net.graph, one, C);
    EXPECT_TRUE(at::equal(alone.crown_lower[0], all.crown_lower[b])) << "box " << b;
    EXPECT_TRUE(at::equal(alone.input_A[0], all.input_A[b])) << "box " << b;
    EXPECT_TRUE(at::equal(alone.ibp_lower[0], all.ibp_lower[b])) << "box " << b;
    if (b % 2 == 1) {
      EXPECT_TRUE(at::equal(odds.crown_lower[b / 2], all.crown_lower[b])) << "box " << b;
      EXPECT_TRUE(at::equal(odds.input_A[b / 2], all.input_A[b])) << "box " << b;
    }
  }
}

// Runs of affine nodes: a Linear without bias then a Linear (two that mix) composed into one
// map; a reshape; no ReLU at all.
TEST(PlannedChain, ComposesRunsOfAffineNodes) {
  testing::Rng rng(31);
  testing::Net n({1, 2, 3}, rng);
  int x = n.flatten(n.input());
  x = n.linear_no_bias(x, 8);
  x = n.linear(x, 12);
  x = n.relu(x);
  x = n.linear(x, 4);
  const BoundGraph g = n.finish(x);
  const InputBox box = random_boxes(5, 6, at::kFloat, 32);
  const InputBox shaped{box.lower.reshape({5, 2, 3}), box.upper.reshape({5, 2, 3})};
  const at::Tensor C = at::eye(4, at::kDouble).slice(0, 0, 2);
  const ChainBounds want = reference_bounds(g, shaped, C);
  const ChainBounds got = planned_bounds(g, shaped, C);
  expect_close(got.crown_lower, want.crown_lower, 2e-4, "CROWN's lower bounds");
  expect_close(got.input_A, want.input_A.reshape({5, 2, 6}), 2e-4, "coefficients at the input");
  // Composed before IBP: never looser than node-by-node IBP.
  EXPECT_TRUE((got.ibp_lower >= want.ibp_lower - 1e-4).all().item<bool>());

  testing::Net lin({1, 3}, rng);
  const BoundGraph affine = lin.finish(lin.linear(lin.input(), 2));
  const InputBox small = random_boxes(3, 3, at::kFloat, 33);
  const at::Tensor C2 = at::eye(2, at::kDouble);
  expect_close(planned_bounds(affine, small, C2).crown_lower,
               reference_bounds(affine, small, C2).crown_lower, 1e-5, "an affine network");
}

TEST(PlannedChain, RefusesWhatItDoesNotCompute) {
  testing::Rng rng(41);
  const at::Tensor C = at::eye(2, at::kDouble);
  std::string why;
  {  // a residual connection
    testing::Net n({1, 4}, rng);
    const int a = n.linear(n.input(), 4);
    const int r = n.relu(a);
    const int s = n.add(ops::make_add(), {r, a});
    const BoundGraph g = n.finish(n.linear(s, 2));
    EXPECT_EQ(PlannedChain::plan(g, C, tight_unstable(), why), nullptr);
    EXPECT_NE(why.find("feeds 2 nodes"), std::string::npos) << why;
  }
  {  // a nonlinearity other than ReLU
    testing::Net n({1, 4}, rng);
    const int s = n.add(ops::make_sigmoid(), {n.linear(n.input(), 4)});
    const BoundGraph g = n.finish(n.linear(s, 2));
    EXPECT_EQ(PlannedChain::plan(g, C, tight_unstable(), why), nullptr);
    EXPECT_NE(why.find("neither affine nor a ReLU"), std::string::npos) << why;
  }
  {  // another scheme
    const Net net = build(random_layers({3, 4, 2}, 42));
    BoundOptions o = tight_unstable();
    o.scheme = IntermediateScheme::kTight;
    EXPECT_EQ(PlannedChain::plan(net.graph, C, o, why), nullptr);
    EXPECT_NE(why.find("tight_unstable"), std::string::npos) << why;
  }
}

// Input splitting with the planned passes and with the reference ones: the same verdict, the
// same boxes bounded, worst bounds equal to rounding.
TEST(PlannedChain, InputSplittingSearchesAsTheReferencePath) {
  const Net net = build(random_layers({3, 16, 16, 16, 2}, 51));
  const InputBox box{at::full({1, 3}, -1.0), at::full({1, 3}, 1.0)};
  at::Generator gen = at::detail::createCPUGenerator(52);
  const double low = sampled_min(net.graph, box, gen, 20000);
  const io::VnnlibProperty p = property_of(box, 2, {{{{{1.0, 0.0}, low - 0.05}}}});
  const auto objs = objectives(p.cases[0], 2, at::kFloat);
  std::vector<bab::BabResult> results;
  for (const bab::PassPath path : {bab::PassPath::kPlanned, bab::PassPath::kReference}) {
    bab::BabOptions o;
    o.deterministic = true;
    o.max_rounds = 30;
    o.bound = tight_unstable();
    o.passes = path;
    const bab::Deadline deadline(60);
    results.push_back(
        bab::input_bab(o, context_of(deadline), net.graph, {p.cases[0], objs[0], objs}));
  }
  EXPECT_EQ(status(results[0]), status(results[1]));
  EXPECT_EQ(results[0].domains_bounded, results[1].domains_bounded);
  EXPECT_EQ(results[0].rounds, results[1].rounds);
}

}  // namespace
}  // namespace distcrown
