// α-CROWN (methods/alpha_crown.hpp): never looser than CROWN, sound by sampling (uniform points,
// random vertices and the box corners, forward passes), monotone in the number of iterations
// (the optimisation path is deterministic and the result is the best over the iterations), sound
// under a spec matrix, one-sided runs; against auto_LiRPA's references (../shared/fixtures, the
// every case): at least as tight as CROWN, sound against the sampled ranges, within 1e-3·|ref|
// of auto_LiRPA's α-CROWN or tighter; and the CLI's `bounds --method alpha-crown`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "bounds_table.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "fixtures.hpp"
#include "io/synthetic.hpp"
#include "onnx_builder.hpp"
#include "process.hpp"
#include "sampling.hpp"

namespace distcrown {
namespace {

using testing::fmt;
using testing::outputs;

// Not looser than CROWN: up to this fraction of max(1, |bound|) (float32 rounding).
constexpr double kTightTol = 1e-6;
// Sampled outputs inside the bounds: up to this fraction of max(1, |value|).
constexpr double kSoundTol = 1e-5;

// Points of the box [lo, hi] ([1, *shape]): lower, upper and centre, `vertices` random vertices
// and `uniform` uniform points; [N, *shape] in lo's dtype.
at::Tensor sample_box(at::Generator& gen, const at::Tensor& lo, const at::Tensor& hi,
                      int64_t uniform, int64_t vertices) {
  std::vector<int64_t> shape(lo.sizes().begin(), lo.sizes().end());
  const auto with = [&](int64_t n) {
    std::vector<int64_t> s = shape;
    s[0] = n;
    return s;
  };
  const auto opts = at::TensorOptions().dtype(lo.scalar_type());
  const at::Tensor u = lo + (hi - lo) * at::rand(with(uniform), gen, opts);
  const at::Tensor v = at::where(at::rand(with(vertices), gen, opts) < 0.5, hi, lo);
  const at::Tensor all = at::cat({lo, hi, (lo + hi) / 2, v, u}, 0);
  return at::minimum(at::maximum(all, lo), hi);
}

// Every row of y [N, spec] within [lower, upper] ([1, spec]; an undefined side is not checked),
// up to kSoundTol·max(1, |y|). Reports the worst violation.
void expect_contains(const Interval& b, const at::Tensor& y, const std::string& what) {
  const at::Tensor yd = y.to(at::kDouble);
  const at::Tensor slack = yd.abs().clamp_min(1.0) * kSoundTol;
  for (const bool low : {true, false}) {
    const at::Tensor& side = low ? b.lower : b.upper;
    if (!side.defined()) continue;
    const at::Tensor s = side.to(at::kDouble);
    const at::Tensor excess = (low ? s - yd : yd - s) - slack;  // > 0: violation
    const at::Tensor flat = excess.reshape({-1});
    const int64_t worst = flat.argmax().item<int64_t>();
    if (flat[worst].item<double>() <= 0) continue;
    const int64_t n = worst / y.size(1);
    const int64_t j = worst % y.size(1);
    ADD_FAILURE() << what << ": sample " << n << ", output " << j << ": value "
                  << fmt(yd[n][j].item<double>()) << (low ? " below lower " : " above upper ")
                  << fmt(s[0][j].item<double>()) << " (" << (flat > 0).sum().item<int64_t>()
                  << " violations)";
  }
}

// a never looser than b: a.lower ≥ b.lower − tol·max(1, |b|), a.upper ≤ b.upper + tol·max(1, |b|).
void expect_not_looser(const Interval& a, const Interval& b, double tol, const std::string& what) {
  for (const bool low : {true, false}) {
    const at::Tensor& as = low ? a.lower : a.upper;
    const at::Tensor& bs = low ? b.lower : b.upper;
    if (!as.defined() || !bs.defined()) continue;
    ASSERT_EQ(as.sizes(), bs.sizes()) << what;
    const at::Tensor ad = as.to(at::kDouble);
    const at::Tensor bd = bs.to(at::kDouble);
    const at::Tensor excess = (low ? bd - ad : ad - bd) - bd.abs().clamp_min(1.0) * tol;
    const int64_t worst = excess.reshape({-1}).argmax().item<int64_t>();
    EXPECT_LE(excess.reshape({-1})[worst].item<double>(), 0.0)
        << what << ": " << (low ? "lower " : "upper ") << worst << " is "
        << fmt(ad.reshape({-1})[worst].item<double>()) << ", reference "
        << fmt(bd.reshape({-1})[worst].item<double>());
  }
}

// Mean width of the bounds (upper − lower).
double mean_width(const Interval& b) {
  return (b.upper - b.lower).to(at::kDouble).mean().item<double>();
}

// A box around a N(0, 1) centre with half-width `radius`, [1, in].
InputBox random_box(at::Generator& gen, int64_t in, double radius, at::ScalarType dtype) {
  const at::Tensor c = at::randn({1, in}, gen, at::TensorOptions().dtype(at::kDouble));
  return {(c - radius).to(dtype), (c + radius).to(dtype)};
}

struct MlpConfig {
  int64_t in, hidden;
  int depth;
  int64_t out;
  uint64_t seed;
  double radius;
};

const std::vector<MlpConfig> kMlps{
    {5, 16, 2, 3, 1, 0.5},
    {8, 24, 3, 4, 2, 0.3},
    {4, 32, 4, 2, 3, 0.4},
    {6, 20, 5, 5, 4, 0.2},
};

std::string name_of(const MlpConfig& c, at::ScalarType t) {
  return "mlp " + std::to_string(c.in) + "-" + std::to_string(c.hidden) + "x" +
         std::to_string(c.depth) + "-" + std::to_string(c.out) + " seed " + std::to_string(c.seed) +
         (t == at::kFloat ? " f32" : " f64");
}

// α-CROWN vs CROWN and samples on one graph and box, C optional.
void check_alpha(const BoundGraph& g, const InputBox& box, const at::Tensor& C, at::Generator& gen,
                 const std::string& what, int iterations = 10, const BoundOptions& options = {}) {
  AlphaOptions ao;
  ao.iterations = iterations;
  const Interval crown = compute_bounds(g, box, Method::kCrown, options, C);
  const AlphaResult a = alpha_crown(ao.with_bound(options), {}, g, box, C);
  const int64_t spec = C.defined() ? C.size(0) : g.output_numel();
  ASSERT_TRUE(a.bounds.lower.defined() && a.bounds.upper.defined()) << what;
  ASSERT_EQ(a.bounds.lower.sizes(), at::IntArrayRef({1, spec})) << what;
  ASSERT_EQ(a.bounds.upper.sizes(), at::IntArrayRef({1, spec})) << what;
  EXPECT_TRUE(at::isfinite(a.bounds.lower).all().item<bool>()) << what;
  EXPECT_TRUE(at::isfinite(a.bounds.upper).all().item<bool>()) << what;
  EXPECT_FALSE(a.bounds.lower.requires_grad()) << what << ": result keeps autograd history";
  EXPECT_GE(a.iterations_run, 1) << what;
  expect_not_looser(a.bounds, crown, kTightTol, what + " alpha vs crown");
  const at::Tensor x = sample_box(gen, box.lower, box.upper, 3000, 256);
  expect_contains(a.bounds, outputs(g, x, C), what + " alpha soundness");
}

TEST(AlphaCrown, TighterThanCrownAndSoundOnRandomMlps) {
  for (const auto& c : kMlps) {
    BoundGraph g = io::make_random_mlp(c.in, c.hidden, c.depth, c.out, c.seed);
    for (const at::ScalarType t : {at::kFloat, at::kDouble}) {
      g.to_dtype(t);
      at::Generator gen = at::detail::createCPUGenerator(c.seed * 31 + 7);
      const InputBox box = random_box(gen, c.in, c.radius, t);
      check_alpha(g, box, at::Tensor(), gen, name_of(c, t));
      // Every neuron a CROWN row and α everywhere (auto_LiRPA without sparse intermediate
      // bounds): never looser than that scheme's CROWN, and sound.
      BoundOptions every;
      every.scheme = IntermediateScheme::kEvery;
      check_alpha(g, box, at::Tensor(), gen, name_of(c, t) + " every", 10, every);
    }
  }
}

TEST(AlphaCrown, OptimisationTightensSomething) {
  // Not a tautology of "never looser": on a network with many unstable neurons the optimised
  // slopes must actually gain over CROWN's (otherwise the optimiser is a no-op).
  BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  at::Generator gen = at::detail::createCPUGenerator(5);
  const InputBox box = random_box(gen, 5, 1.0, at::kFloat);
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  AlphaOptions ao;
  ao.iterations = 20;
  const AlphaResult a = alpha_crown(ao, {}, g, box);
  EXPECT_LT(mean_width(a.bounds), 0.99 * mean_width(crown))
      << "alpha " << mean_width(a.bounds) << " crown " << mean_width(crown);
}

TEST(AlphaCrown, OneIterationIsCrown) {
  // Iteration 0 uses CROWN's slopes, and a single iteration takes no step.
  for (const auto& c : kMlps) {
    BoundGraph g = io::make_random_mlp(c.in, c.hidden, c.depth, c.out, c.seed);
    at::Generator gen = at::detail::createCPUGenerator(c.seed * 31 + 7);
    const InputBox box = random_box(gen, c.in, c.radius, at::kFloat);
    AlphaOptions ao;
    ao.iterations = 1;
    const Interval crown = compute_bounds(g, box, Method::kCrown);
    const AlphaResult a = alpha_crown(ao, {}, g, box);
    expect_not_looser(a.bounds, crown, kTightTol, name_of(c, at::kFloat) + " 1 iteration");
    expect_not_looser(crown, a.bounds, kTightTol, name_of(c, at::kFloat) + " crown vs 1 it.");
  }
}

// Sin and Cos (ops/trig.cpp) optimise their two slopes per neuron: x [1, 4] -> Gemm 4->12 -> Sin
// -> Gemm 12->12 -> Cos -> Gemm 12->3, weights wide enough that the inputs of both reach
// extrema. Sound, never looser than CROWN, and tighter: the intercepts pass their gradient on.
// At learning rate 0.1: the default 0.5 gains nothing on this network (why is not established),
// 0.1 gains about 20% of the mean width.
TEST(AlphaCrown, SinCosTighterThanCrownAndSound) {
  at::Generator gen = at::detail::createCPUGenerator(13);
  const auto normal = [&](const std::vector<int64_t>& shape, double scale) {
    return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)) * scale;
  };
  testing::OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 3});
  b.initializer("W1", normal({12, 4}, 1.0)).initializer("b1", normal({12}, 0.5));
  b.initializer("W2", normal({12, 12}, 0.25)).initializer("b2", normal({12}, 0.5));
  b.initializer("W3", normal({3, 12}, 0.5)).initializer("b3", normal({3}, 0.5));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h1"}, {testing::attr_int("transB", 1)});
  b.node("sin", "Sin", {"h1"}, {"s1"});
  b.node("fc2", "Gemm", {"s1", "W2", "b2"}, {"h2"}, {testing::attr_int("transB", 1)});
  b.node("cos", "Cos", {"h2"}, {"s2"});
  b.node("fc3", "Gemm", {"s2", "W3", "b3"}, {"y"}, {testing::attr_int("transB", 1)});
  BoundGraph g = io::load_onnx_bytes(b.bytes(), "sin_cos.onnx");
  for (const at::ScalarType t : {at::kFloat, at::kDouble}) {
    g.to_dtype(t);
    const InputBox box = random_box(gen, 4, 0.3, t);
    const std::string what = t == at::kFloat ? "sin/cos f32" : "sin/cos f64";
    AlphaOptions ao;
    ao.iterations = 20;
    ao.lr = 0.1;
    const Interval crown = compute_bounds(g, box, Method::kCrown);
    const AlphaResult a = alpha_crown(ao, {}, g, box);
    ASSERT_TRUE(at::isfinite(a.bounds.lower).all().item<bool>()) << what;
    ASSERT_TRUE(at::isfinite(a.bounds.upper).all().item<bool>()) << what;
    expect_not_looser(a.bounds, crown, kTightTol, what + " alpha vs crown");
    expect_contains(a.bounds, outputs(g, sample_box(gen, box.lower, box.upper, 3000, 256), {}),
                    what + " alpha soundness");
    EXPECT_LT(mean_width(a.bounds), 0.9 * mean_width(crown))
        << what << ": alpha " << mean_width(a.bounds) << " crown " << mean_width(crown);
  }
}

// The synthetic convnet (io/synthetic.hpp), and a box of the given radius around a random image.
BoundGraph random_convnet() {
  return io::load_onnx_bytes(io::serialize_onnx_model(io::random_convnet_onnx(16, 3)),
                             "<random convnet>");
}

InputBox image_box(at::Generator& gen, double radius) {
  const at::Tensor centre = at::rand({1, 1, 28, 28}, gen, at::TensorOptions().dtype(at::kFloat));
  return {centre - radius, centre + radius};
}

TEST(AlphaCrown, ConvnetTighterThanCrownAndSound) {
  BoundGraph g = random_convnet();
  at::Generator gen = at::detail::createCPUGenerator(99);
  const InputBox box = image_box(gen, 0.02);
  AlphaOptions ao;
  ao.iterations = 4;
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  const AlphaResult a = alpha_crown(ao, {}, g, box);
  expect_not_looser(a.bounds, crown, kTightTol, "convnet alpha vs crown");
  const at::Tensor x = sample_box(gen, box.lower, box.upper, 500, 100);
  expect_contains(a.bounds, outputs(g, x, at::Tensor()), "convnet alpha soundness");
}

// CROWN's intermediate bounds of random_convnet() over `box` (by node), its second convolution
// (the start: [1, 32, 7, 7]) and the ReLU after its first (a node below that start).
struct ConvStart {
  std::vector<std::optional<Interval>> crown;
  std::vector<int> convs;  // pre-activation nodes shaped [1, C, H, W]
  int start = -1;
  int relu = -1;
};

ConvStart second_conv_start(const BoundGraph& g, const InputBox& box) {
  CrownEngine engine(g, box, {});
  engine.compute_intermediate_bounds();
  ConvStart c;
  c.crown.resize(size_t(g.size()));
  for (int i = 1; i < g.size(); ++i) {
    if (!g.is_pre_activation(i)) continue;
    c.crown[size_t(i)] = engine.bounds(i);
    if (g.node(i).shape.size() == 4) c.convs.push_back(i);
  }
  if (c.convs.size() != 2U) return c;
  c.start = c.convs[1];
  for (int i = 1; i < g.size(); ++i) {
    if (g.node(i).inputs == std::vector<int>{c.convs[0]}) c.relu = i;
  }
  return c;
}

// α-CROWN (3 iterations) on random_convnet() over `box`: not looser than CROWN and sound on
// samples.
void expect_alpha_tight_and_sound(const BoundGraph& g, const InputBox& box, at::Generator& gen,
                                  const std::string& what) {
  AlphaOptions ao;
  ao.iterations = 3;
  const AlphaResult a = alpha_crown(ao, {}, g, box);
  expect_not_looser(a.bounds, compute_bounds(g, box, Method::kCrown), kTightTol,
                    what + " alpha vs crown");
  const at::Tensor x = sample_box(gen, box.lower, box.upper, 300, 100);
  expect_contains(a.bounds, outputs(g, x, at::Tensor()), what + " alpha soundness");
}

TEST(AlphaCrown, WideConvolutionalStartSharesAlphaPerChannel) {
  // auto_LiRPA's use_full_conv_alpha_thresh: a convolutional start node with more than 512
  // neurons unstable under CROWN gets one α per channel for the ReLUs below it.
  BoundGraph g = random_convnet();
  at::Generator gen = at::detail::createCPUGenerator(7);
  const InputBox box = image_box(gen, 0.3);
  const ConvStart c = second_conv_start(g, box);
  ASSERT_EQ(c.convs.size(), 2U);
  const int start = c.start;  // Conv(16 -> 32): [1, 32, 7, 7]
  const Interval& b = *c.crown[size_t(start)];
  ASSERT_GT(((b.lower < 0) & (b.upper > 0)).sum().item<int64_t>(), 512)
      << "the box must leave more than 512 neurons of the second convolution unstable";
  const int relu = c.relu;
  ASSERT_GE(relu, 0);
  AlphaSlopes slopes(g, 10);
  slopes.initialise_from(c.crown);
  const Interval* in[] = {&*c.crown[size_t(c.convs[0])]};
  // Rows 0 and 48 lie in channel 0 (7·7 positions per channel), row 49 in channel 1.
  const at::Tensor rows = at::tensor(std::vector<int64_t>{0, 48, 49}, at::kLong);
  const RelaxParams unread = slopes.params(start, relu, rows, in);
  EXPECT_TRUE(unread.source_l.defined() && !unread.alpha_l.defined())
      << "α is given unread, for the ReLU to read inside its recomputed step";
  const RelaxParams p = resolved_alpha(unread);
  EXPECT_EQ(slopes.get(start, relu).size(1), 32) << "one α row per channel";
  EXPECT_TRUE(p.alpha_l.defined());
  EXPECT_EQ(p.alpha_l.size(0), 3);
  // Make channel 0 and channel 1 differ, then rows of one channel must see the same α.
  {
    c10::NoGradGuard no_grad;
    slopes.get(start, relu)[0][1].fill_(0.25);
  }
  const RelaxParams q = resolved_alpha(slopes.params(start, relu, rows, in));
  EXPECT_TRUE(at::equal(q.alpha_l[0], q.alpha_l[1]));
  EXPECT_FALSE(at::equal(q.alpha_l[0], q.alpha_l[2]));
  // And the optimisation with shared α stays sound and not looser than CROWN.
  expect_alpha_tight_and_sound(g, box, gen, "wide convnet");
}

TEST(AlphaCrown, SparseAlphaHoldsRowsForUnstableNeuronsOnly) {
  // auto_LiRPA's sparse α: an intermediate start whose passes bound only its neurons unstable
  // under CROWN has α rows for those alone; a row stable there gets the fixed initial slopes.
  BoundGraph g = random_convnet();
  at::Generator gen = at::detail::createCPUGenerator(7);
  const InputBox box = image_box(gen, 0.02);
  const ConvStart c = second_conv_start(g, box);
  ASSERT_EQ(c.convs.size(), 2U);
  const int start = c.start;
  const std::vector<std::optional<Interval>>& crown = c.crown;
  const Interval& b = *crown[size_t(start)];
  const at::Tensor unstable = ((b.lower < 0) & (b.upper > 0)).reshape({-1});
  const int64_t n = unstable.numel();
  const int64_t k = unstable.sum().item<int64_t>();
  ASSERT_GT(k, 0) << "the box must leave some neurons of the second convolution unstable";
  ASSERT_LT(double(k), 0.9 * double(n)) << "and most of them stable";
  const int relu = c.relu;  // the ReLU after the first convolution
  ASSERT_GE(relu, 0);
  const Interval* in[] = {&*crown[size_t(c.convs[0])]};
  const at::Tensor all = at::arange(n, at::kLong);
  AlphaSlopes dense(g, 10);
  dense.initialise_from(crown);
  AlphaSlopes sparse(g, 10);
  sparse.initialise_from(crown, BoundOptions{});
  const RelaxParams d = resolved_alpha(dense.params(start, relu, all, in));
  const RelaxParams s = resolved_alpha(sparse.params(start, relu, all, in));
  EXPECT_EQ(dense.get(start, relu).size(1), n);
  EXPECT_EQ(sparse.get(start, relu).size(1), k) << "one α row per unstable neuron";
  EXPECT_TRUE(at::equal(d.alpha_l, s.alpha_l)) << "the same initial slopes on every row";
  // The first unstable neuron's row is α position 0; a stable row keeps the initial slopes.
  {
    c10::NoGradGuard no_grad;
    sparse.get(start, relu)[0][0].fill_(0.25);
  }
  const int64_t first = unstable.nonzero()[0].item<int64_t>();
  const int64_t stable = (~unstable).nonzero()[0].item<int64_t>();
  const RelaxParams q = resolved_alpha(
      sparse.params(start, relu, at::tensor(std::vector<int64_t>{first, stable}, at::kLong), in));
  // α is also feature-sparse (auto_LiRPA's sparse_features_alpha): only the ReLU's positions
  // unstable under CROWN hold it, the others read their initial slopes.
  const Interval& relu_in = *crown[size_t(c.convs[0])];
  const at::Tensor holds = ((relu_in.lower < 0) & (relu_in.upper > 0)).any(0, true);  // [1, *shape]
  ASSERT_LT(double(holds.sum().item<int64_t>()), 0.9 * double(holds.numel()));
  EXPECT_EQ(sparse.get(start, relu).dim(), 4) << "[2, rows, B, U]";
  EXPECT_EQ(sparse.get(start, relu).size(3), holds.sum().item<int64_t>());
  EXPECT_TRUE(at::equal(q.alpha_l[0], at::where(holds, 0.25, d.alpha_l[first])));
  EXPECT_TRUE(at::equal(sparse.dense(start, relu)[0][0], q.alpha_l[0]));
  EXPECT_TRUE(at::equal(q.alpha_l[1], d.alpha_l[stable]));
  // α-CROWN with sparse α (its default) stays sound and not looser than CROWN.
  expect_alpha_tight_and_sound(g, box, gen, "sparse");
}

// A random MLP of kMlps, a box of twice its radius (float32), its generator after drawing the
// box, and CROWN's bounds there.
struct MlpCase {
  BoundGraph g;
  at::Generator gen;
  InputBox box;
  Interval crown;
};
MlpCase mlp_case(const MlpConfig& c) {
  BoundGraph g = io::make_random_mlp(c.in, c.hidden, c.depth, c.out, c.seed);
  at::Generator gen = at::detail::createCPUGenerator(c.seed * 31 + 7);
  const InputBox box = random_box(gen, c.in, 2 * c.radius, at::kFloat);
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  return {std::move(g), gen, box, crown};
}

TEST(AlphaCrown, StopsOnceTheGoalIsProved) {
  auto [g, gen, box, crown] = mlp_case(kMlps[0]);
  AlphaOptions ao;
  ao.iterations = 20;
  ao.early_stop_patience = 100;
  const AlphaResult full = alpha_crown(ao.sided(BoundSides::kLower), {}, g, box);
  ASSERT_EQ(full.iterations_run, 20);
  const double crown_sum = crown.lower.sum().item<double>();
  const double alpha_sum = full.bounds.lower.sum().item<double>();
  ASSERT_GT(alpha_sum, crown_sum + 1e-4) << "α must improve on CROWN here";
  // A goal CROWN meets: no α step, CROWN's bounds (and intermediate bounds) returned.
  ao.proved = [&](const at::Tensor& lb) { return lb.sum().item<double>() >= crown_sum - 1e-6; };
  const AlphaResult at_crown = alpha_crown(ao.sided(BoundSides::kLower), {}, g, box);
  EXPECT_EQ(at_crown.iterations_run, 0);
  EXPECT_TRUE(at::allclose(at_crown.bounds.lower, crown.lower, 1e-6, 1e-6));
  EXPECT_TRUE(at_crown.intermediate[size_t(g.output() - 1)].has_value());
  // A goal halfway to α's result: it stops after some steps, not all, having met it.
  const double half = (crown_sum + alpha_sum) / 2;
  ao.proved = [&](const at::Tensor& lb) { return lb.sum().item<double>() >= half; };
  const AlphaResult midway = alpha_crown(ao.sided(BoundSides::kLower), {}, g, box);
  EXPECT_GT(midway.iterations_run, 0);
  EXPECT_LT(midway.iterations_run, 20);
  EXPECT_GE(midway.bounds.lower.sum().item<double>(), half);
}

TEST(AlphaCrown, MemoryLimitLeavesStartsOutAndStaysSound) {
  // A limit just above what is live before α-CROWN starts: the intermediate starts it reaches
  // past half of it are bounded by CROWN without α, and the result is still never looser than
  // CROWN (iteration 0 is CROWN) and sound. A limit that does not bind changes nothing.
  memory::install_counting_allocator();
  auto [g, gen, box, crown] = mlp_case(kMlps[3]);
  AlphaOptions ao;
  ao.iterations = 10;
  const AlphaResult free = alpha_crown(ao, {}, g, box);
  EXPECT_EQ(free.starts_left_out, 0);
  EXPECT_FALSE(free.memory_limited);

  PassContext tight;
  tight.memory_limit_bytes = 2 * (memory::live_bytes() + 1);
  const AlphaResult limited = alpha_crown(ao, tight, g, box);
  EXPECT_GE(limited.starts_left_out, 1);
  EXPECT_GE(limited.iterations_run, 1);
  expect_not_looser(limited.bounds, crown, kTightTol, "memory-limited alpha vs crown");
  const at::Tensor x = sample_box(gen, box.lower, box.upper, 3000, 256);
  expect_contains(limited.bounds, outputs(g, x, at::Tensor()), "memory-limited alpha soundness");

  PassContext roomy;
  roomy.memory_limit_bytes = int64_t{1} << 50;
  const AlphaResult unbound = alpha_crown(ao, roomy, g, box);
  EXPECT_EQ(unbound.starts_left_out, 0);
  EXPECT_TRUE(at::equal(unbound.bounds.lower, free.bounds.lower));
  EXPECT_TRUE(at::equal(unbound.bounds.upper, free.bounds.upper));
}

TEST(AlphaCrown, MoreIterationsNeverLooser) {
  // With the reference-saving iteration fixed (by default it is half the iteration count), a
  // shorter run follows a prefix of a longer run's path, and the result is the best over the
  // path: exactly not looser (no tolerance). One side per run: a two-sided run's lower side
  // starts from the upper side's final reference, which depends on the iteration count.
  for (const auto& c : kMlps) {
    BoundGraph g = io::make_random_mlp(c.in, c.hidden, c.depth, c.out, c.seed);
    at::Generator gen = at::detail::createCPUGenerator(c.seed * 31 + 7);
    const InputBox box = random_box(gen, c.in, 2 * c.radius, at::kFloat);
    for (const bool lower : {true, false}) {
      Interval previous;
      for (const int n : {1, 2, 5, 9, 16}) {
        AlphaOptions ao;
        ao.iterations = n;
        ao.save_reference_after = 4;
        const Interval b =
            alpha_crown(ao.sided(lower ? BoundSides::kLower : BoundSides::kUpper), {}, g, box)
                .bounds;
        if (previous.lower.defined() || previous.upper.defined()) {
          expect_not_looser(b, previous, 0.0,
                            name_of(c, at::kFloat) + (lower ? " lower, " : " upper, ") +
                                std::to_string(n) + " iterations");
        }
        previous = b;
      }
    }
  }
}

TEST(AlphaCrown, SpecMatrixSoundAndLowerOnly) {
  for (const auto& c : kMlps) {
    BoundGraph g = io::make_random_mlp(c.in, c.hidden, c.depth, c.out, c.seed);
    for (const at::ScalarType t : {at::kFloat, at::kDouble}) {
      g.to_dtype(t);
      const std::string what = name_of(c, t) + " with C";
      at::Generator gen = at::detail::createCPUGenerator(c.seed * 17 + 3);
      const InputBox box = random_box(gen, c.in, c.radius, t);
      const at::Tensor C = at::randn({7, c.out}, gen, at::TensorOptions().dtype(t));
      check_alpha(g, box, C, gen, what);

      AlphaOptions ao;
      ao.iterations = 10;
      const AlphaResult lower = alpha_crown(ao.sided(BoundSides::kLower), {}, g, box, C);
      EXPECT_FALSE(lower.bounds.upper.defined()) << what << ": lower-only has an upper bound";
      ASSERT_TRUE(lower.bounds.lower.defined()) << what;
      ASSERT_EQ(lower.bounds.lower.sizes(), at::IntArrayRef({1, C.size(0)})) << what;
      // And an upper-only run gives no lower bound; its upper is sound.
      const AlphaResult upper = alpha_crown(ao.sided(BoundSides::kUpper), {}, g, box, C);
      EXPECT_FALSE(upper.bounds.lower.defined()) << what;
      ASSERT_TRUE(upper.bounds.upper.defined()) << what;
      const at::Tensor x = sample_box(gen, box.lower, box.upper, 1000, 64);
      expect_contains(lower.bounds, outputs(g, x, C), what + " lower-only");
      expect_contains(upper.bounds, outputs(g, x, C), what + " upper-only");
    }
  }
}

TEST(AlphaCrown, RejectsBadOptions) {
  BoundGraph g = io::make_random_mlp(3, 8, 2, 2, 1);
  const InputBox box{at::zeros({1, 3}), at::ones({1, 3})};
  AlphaOptions ao;
  ao.iterations = 0;
  EXPECT_THROW(alpha_crown(ao, {}, g, box), InvalidArgument);
  ao.iterations = 3;
  ao.lr = 0;
  EXPECT_THROW(alpha_crown(ao, {}, g, box), InvalidArgument);
}

// auto_LiRPA's α-CROWN reference for one case (a refs/ JSON): at least as tight as its CROWN,
// sound against the sampled range, within 1e-3·|ref| of its α-CROWN or tighter.
void expect_alpha_crown_matches_reference(const std::filesystem::path& f) {
  const std::string name = f.stem().string();
  SCOPED_TRACE(name);
  const nlohmann::json ref = testing::read_json(f);
  const BoundGraph g =
      io::load_onnx((testing::fixtures_dir() / ref["model"].get<std::string>()).string());
  const InputBox box = testing::reference_box(ref);
  AlphaOptions ao;
  ao.iterations = 20;
  ao.lr = 0.5;
  const auto start = std::chrono::steady_clock::now();
  BoundOptions as_ref;  // the reference's intermediate scheme (every neuron for the ViT)
  as_ref.scheme = testing::reference_scheme(ref, "alpha_crown");
  const Interval a = alpha_crown(ao.with_bound(as_ref), {}, g, box).bounds;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "  " << name << ": alpha-crown " << secs << " s\n";
  const auto vec = [](const at::Tensor& t) {
    const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  };
  const std::vector<double> lo = vec(a.lower);
  const std::vector<double> hi = vec(a.upper);
  const auto get = [&](const char* k1, const char* k2) {
    return ref[k1][k2].get<std::vector<double>>();
  };
  const auto crown_lo = get("crown", "lower");
  const auto crown_hi = get("crown", "upper");
  const auto ref_lo = get("alpha_crown", "lower");
  const auto ref_hi = get("alpha_crown", "upper");
  const auto min = get("sampled", "min");
  const auto max = get("sampled", "max");
  ASSERT_EQ(lo.size(), crown_lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    // At least as tight as auto_LiRPA's CROWN.
    EXPECT_GE(lo[i], crown_lo[i] - 1e-5 * std::max(1.0, std::abs(crown_lo[i]))) << "lower " << i;
    EXPECT_LE(hi[i], crown_hi[i] + 1e-5 * std::max(1.0, std::abs(crown_hi[i]))) << "upper " << i;
    // Sound against the sampled range.
    EXPECT_LE(lo[i], min[i] + 1e-5 * std::max(1.0, std::abs(min[i]))) << "lower " << i;
    EXPECT_GE(hi[i], max[i] - 1e-5 * std::max(1.0, std::abs(max[i]))) << "upper " << i;
    // Within 1e-3·|ref| of auto_LiRPA's α-CROWN, or tighter (the bar; the same
    // algorithm lands within 5.4e-4·|ref| on the ReLU cases and 6e-5 on the ViT's, see
    // docs/results.md).
    EXPECT_GE(lo[i], ref_lo[i] - 1e-3 * std::abs(ref_lo[i])) << "lower " << i;
    EXPECT_LE(hi[i], ref_hi[i] + 1e-3 * std::abs(ref_hi[i])) << "upper " << i;
  }
}

// One case of each family, the cheapest (a few seconds each; the quick tier): ACAS Xu, the MNIST
// MLP, the oval21 CNN, the CIFAR ResNet, the Sigmoid MLP and the AveragePool CNN.
const std::set<std::string>& one_case_of_each_family() {
  static const std::set<std::string> cases{"acasxu_1_1_prop_1",         "mnist_256x2_prop_0_0.03",
                                           "oval21_base_img2578",       "cifar10_resnet_2b_prop_0",
                                           "eran_sigmoid_6x200_idx_56", "verivital_avgpool_prop_0"};
  return cases;
}

// auto_LiRPA's references: every case (the MLPs, the oval21 CNN and the ResNet) and the refs/ops
// cases whose operators exist (testing::supported_ops_cases()), those of one_case_of_each_family()
// or the others.
std::vector<std::filesystem::path> alpha_reference_cases(bool one_of_each_family) {
  std::vector<std::filesystem::path> files = testing::reference_files();
  for (const auto& f : testing::ops_reference_files()) files.push_back(f);
  std::vector<std::filesystem::path> chosen;
  for (const auto& f : files) {
    if (one_case_of_each_family().contains(f.stem().string()) == one_of_each_family) {
      chosen.push_back(f);
    }
  }
  return chosen;
}

TEST(AlphaCrownReference, OneCaseOfEachFamilyMatchesAutoLirpa) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto files = alpha_reference_cases(true);
  EXPECT_EQ(files.size(), one_case_of_each_family().size()) << "a family's case is missing";
  for (const auto& f : files) {
    expect_alpha_crown_matches_reference(f);
  }
}

// The other cases: the ViT's two (about two minutes each on the 2-core machine), the larger MLPs,
// the second ResNet and CNN and ACAS Xu properties (the full tier).
TEST(AlphaCrownReference, TheOtherCasesMatchAutoLirpa) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto files = alpha_reference_cases(false);
  EXPECT_FALSE(files.empty());
  for (const auto& f : files) {
    expect_alpha_crown_matches_reference(f);
  }
}

class AlphaCrownCli : public ::testing::Test {
 protected:
  testing::ProcessResult run(const std::string& args) {
    return testing::run_captured(testing::shell_quote(DISTCROWN_CLI_PATH) + " " + args,
                                 dir_.path());
  }
  testing::TempDir dir_;
};

TEST_F(AlphaCrownCli, BoundsTableOnTheEmbeddedDefault) {
  const testing::ProcessResult r = run("bounds --method alpha-crown --iterations 5 --lr 0.3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alpha-crown"), std::string::npos) << r.out;
  // Ten rows "Y_j lower upper" with lower <= upper.
  EXPECT_EQ(testing::read_bounds_table(r.out).rows, 10U) << r.out;
}

TEST_F(AlphaCrownCli, ZeroIterationsIsAUsageError) {
  // A usage error is one line "distcrown: error: ..." and exit 1, like every other error.
  const testing::ProcessResult r = run("bounds --method alpha-crown --iterations 0");
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.err.rfind("distcrown: error:", 0), 0U) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace
}  // namespace distcrown
