// Per-operator soundness by sampling. Small random graphs of each operator family (fixed seeds)
// are bounded over random input boxes (random centre and radii, some coordinates of zero width);
// every output at 2000 uniform samples of the box, 256 random vertices, and the all-lower,
// all-upper and centre points must lie within the IBP bounds and within the CROWN bounds of every
// intermediate scheme (auto_lirpa, tight, every, tight_unstable), with a tolerance of
// 1e-5·max(1, |y|) in float32 and 1e-9·max(1, |y|) in float64. Also: the tight schemes are
// never looser than IBP (the default
// scheme is not always tighter than IBP, so that is not asserted), and chunked CROWN
// (crown_batch_size 3) agrees with unchunked CROWN to a few units in the last place (the engine
// keeps float32 passes bitwise equal, see docs/architecture.md "Row independence"; float64 kernels
// may differ by an ulp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "random_net.hpp"
#include "sampling.hpp"

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/graph/param.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/util/enum_names.hpp"
#include "ops/add_sub.hpp"
#include "ops/batchnorm.hpp"
#include "ops/conv.hpp"
#include "ops/linear.hpp"
#include "ops/mul_div.hpp"
#include "ops/relu.hpp"
#include "ops/reshape.hpp"

namespace distcrown {
namespace {

using testing::fmt;
using testing::Net;
using testing::outputs;
using testing::Rng;

constexpr double kTolFloat = 1e-5;
constexpr double kTolDouble = 1e-9;
constexpr int64_t kUniformSamples = 2000;
constexpr int64_t kVertexSamples = 256;
// Chunked vs unchunked CROWN: at most this many machine epsilons times max(1, |bound|) apart.
// The engine pads passes so that float32 MKL GEMMs round each row independently of the others
// (bitwise equal here); float64 kernels have other thresholds and may differ by an ulp.
constexpr double kChunkUlps = 4;

// A box around a N(0, 1) centre with radii U(0, radius); about `zero_fraction` of the coordinates
// have zero width. shape includes the batch dim.
InputBox random_box(Rng& rng, const std::vector<int64_t>& shape, double radius,
                    double zero_fraction = 0.25) {
  const at::Tensor centre = rng.normal(shape);
  at::Tensor rad = rng.uniform(shape) * radius;
  rad = at::where(rng.uniform(shape) < zero_fraction, at::zeros_like(rad), rad);
  return {centre - rad, centre + rad};
}

// Points of the box [lo, hi] ([*shape]): lower, upper and centre corners, random vertices, then
// uniform samples; [N, *shape], in lo's dtype.
at::Tensor sample_box(Rng& rng, const at::Tensor& lo, const at::Tensor& hi) {
  const auto with_lead = [&](int64_t n) {
    std::vector<int64_t> s{n};
    s.insert(s.end(), lo.sizes().begin(), lo.sizes().end());
    return s;
  };
  const at::Tensor uniform =
      lo + (hi - lo) * rng.uniform(with_lead(kUniformSamples), lo.scalar_type());
  const at::Tensor vertices = at::where(rng.uniform(with_lead(kVertexSamples)) < 0.5, hi, lo);
  const at::Tensor all = at::cat(
      {lo.unsqueeze(0), hi.unsqueeze(0), ((lo + hi) / 2).unsqueeze(0), vertices, uniform}, 0);
  return at::minimum(at::maximum(all, lo), hi);  // rounding must not leave the box
}

// Outputs (C·y when C is defined) of the points x: [N, spec].

// Every sample output y [N, spec] of batch element b lies within the bounds, up to
// tol·max(1, |y|). Reports the worst violation.
void expect_contains(const Interval& bounds, int64_t b, const at::Tensor& y, double tol,
                     const std::string& what) {
  const at::Tensor yd = y.to(at::kDouble);
  const at::Tensor lo = bounds.lower[b].to(at::kDouble).unsqueeze(0);
  const at::Tensor hi = bounds.upper[b].to(at::kDouble).unsqueeze(0);
  const at::Tensor excess = at::maximum(lo - yd, yd - hi) - yd.abs().clamp_min(1.0) * tol;
  const at::Tensor flat = excess.reshape({-1});
  const int64_t worst = flat.argmax().item<int64_t>();
  if (flat[worst].item<double>() <= 0) return;
  const int64_t n = worst / y.size(1);
  const int64_t j = worst % y.size(1);
  ADD_FAILURE() << what << ": batch " << b << ", sample " << n << ", output " << j << ": value "
                << fmt(yd[n][j].item<double>()) << " outside [" << fmt(lo[0][j].item<double>())
                << ", " << fmt(hi[0][j].item<double>()) << "] by "
                << fmt(flat[worst].item<double>()) << " beyond the tolerance ("
                << (flat > 0).sum().item<int64_t>() << " violations of " << flat.numel() << ")";
}

void expect_well_formed(const Interval& bounds, int64_t batch, int64_t spec,
                        const std::string& what) {
  ASSERT_EQ(bounds.lower.sizes(), at::IntArrayRef({batch, spec})) << what;
  ASSERT_EQ(bounds.upper.sizes(), at::IntArrayRef({batch, spec})) << what;
  EXPECT_TRUE(at::isfinite(bounds.lower).all().item<bool>()) << what << ": non-finite lower";
  EXPECT_TRUE(at::isfinite(bounds.upper).all().item<bool>()) << what << ": non-finite upper";
}

// Chunked and unchunked bounds agree to kChunkUlps·eps·max(1, |v|) (see the file comment).
void expect_same_bounds(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double eps = a.scalar_type() == at::kFloat ? double(std::numeric_limits<float>::epsilon())
                                                   : std::numeric_limits<double>::epsilon();
  const at::Tensor ad = a.to(at::kDouble);
  const at::Tensor bd = b.to(at::kDouble);
  const at::Tensor excess = (ad - bd).abs() - ad.abs().clamp_min(1.0) * (kChunkUlps * eps);
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": max difference " << fmt((ad - bd).abs().max().item<double>());
}

// a is never looser than b: a.lower ≥ b.lower − tol, a.upper ≤ b.upper + tol (tol relative).
void expect_not_looser(const Interval& a, const Interval& b, double tol, const std::string& what) {
  const at::Tensor al = a.lower.to(at::kDouble);
  const at::Tensor au = a.upper.to(at::kDouble);
  const at::Tensor bl = b.lower.to(at::kDouble);
  const at::Tensor bu = b.upper.to(at::kDouble);
  const at::Tensor lo_excess = (bl - al) - bl.abs().clamp_min(1.0) * tol;
  const at::Tensor hi_excess = (au - bu) - bu.abs().clamp_min(1.0) * tol;
  EXPECT_LE(lo_excess.max().item<double>(), 0.0) << what << ": lower looser than IBP";
  EXPECT_LE(hi_excess.max().item<double>(), 0.0) << what << ": upper looser than IBP";
}

// All checks on one graph and box in the graph's current dtype.
void check_box(const BoundGraph& g, const InputBox& box, const at::Tensor& C, double tol, Rng& rng,
               const std::string& what) {
  const int64_t batch = box.lower.size(0);
  const int64_t spec = C.defined() ? C.size(0) : g.output_numel();
  std::vector<std::pair<std::string, Interval>> all;
  const Interval ibp = compute_bounds(g, box, Method::kIbp, BoundOptions{}, C);
  expect_well_formed(ibp, batch, spec, what + " ibp");
  all.emplace_back("ibp", ibp);
  for (const auto scheme : {IntermediateScheme::kAutoLirpa, IntermediateScheme::kTight,
                            IntermediateScheme::kEvery, IntermediateScheme::kTightUnstable}) {
    const bool tight = intersects_ibp(scheme);
    const std::string label = "crown(" + std::string(enum_name(scheme)) + ")";
    const std::string name = what + " " + label;
    BoundOptions o;
    o.scheme = scheme;
    o.crown_batch_size = 0;
    const Interval whole = compute_bounds(g, box, Method::kCrown, o, C);
    expect_well_formed(whole, batch, spec, name);
    o.crown_batch_size = 3;
    const Interval chunked = compute_bounds(g, box, Method::kCrown, o, C);
    expect_same_bounds(chunked.lower, whole.lower, name + ": chunked lower");
    expect_same_bounds(chunked.upper, whole.upper, name + ": chunked upper");
    if (tight) expect_not_looser(whole, ibp, tol, name);
    all.emplace_back(label, whole);
  }
  for (int64_t b = 0; b < batch; ++b) {
    const at::Tensor y = outputs(g, sample_box(rng, box.lower[b], box.upper[b]), C);
    for (const auto& [name, bounds] : all) expect_contains(bounds, b, y, tol, what + " " + name);
  }
}

// check_box for each box in float32, then again with the graph, boxes and C cast to float64.
// Leaves the graph in float32.
void check_sound(BoundGraph& g, const std::vector<InputBox>& boxes, uint64_t seed,
                 const std::string& what, const at::Tensor& C = {}) {
  for (const auto& [type, tol] :
       {std::pair{at::kFloat, kTolFloat}, std::pair{at::kDouble, kTolDouble}}) {
    g.to_dtype(type);
    Rng rng(seed * 7919 + 17);
    const at::Tensor c = C.defined() ? C.to(type) : C;
    for (size_t i = 0; i < boxes.size(); ++i) {
      const InputBox box{boxes[i].lower.to(type), boxes[i].upper.to(type)};
      check_box(g, box, c, tol, rng,
                what + " box " + std::to_string(i) + (type == at::kFloat ? " f32" : " f64"));
    }
  }
  g.to_dtype(at::kFloat);
}

std::string seed_name(uint64_t seed) { return "seed " + std::to_string(seed); }

TEST(Soundness, LinearReluMlp) {
  for (uint64_t seed : {1, 2, 3}) {
    Rng rng(seed);
    Net net({1, 6}, rng);
    const int h1 = net.relu(net.linear(net.input(), 10));
    const int h2 = net.relu(net.linear(h1, 10, 1.5, 0.0));  // wide: mostly unstable
    const int p3 = net.linear(h2, 8, 0.1, 0.1, 4.0);        // every neuron stably active
    const int h3 = net.relu(p3);
    // First half stably inactive, second half unstable: the partial (index_copy) path.
    const at::Tensor b4 = at::cat({at::full({4}, -20.0), rng.normal({4}, 0.1)});
    const int p4 = net.linear_with_bias(h3, b4);
    const int h4 = net.relu(p4);
    int out = net.linear(h4, 4);
    if (seed == 3) out = net.relu(out);  // a ReLU as the output node
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.0, 0.05, 0.5, 2.0}) {
      boxes.push_back(random_box(rng, {1, 6}, radius));
      const auto iv = ibp_all(g, boxes.back());
      EXPECT_TRUE((iv[size_t(p3)].lower > 0).all().item<bool>())
          << seed_name(seed) << ": layer 3 is meant to be stably active";
      EXPECT_TRUE((iv[size_t(p4)].upper.slice(1, 0, 4) < 0).all().item<bool>())
          << seed_name(seed) << ": layer 4's first half is meant to be stably inactive";
    }
    check_sound(g, boxes, seed, "mlp " + seed_name(seed));
  }
}

TEST(Soundness, ConvReluFlattenLinear) {
  struct Config {
    std::vector<int64_t> input;
    ops::Conv2dOptions conv;
  };
  // Odd and even spatial sizes, so that the adjoint convolution needs output_padding 0, 1 and 2.
  const std::vector<Config> configs{
      {{1, 2, 7, 7}, {{2, 2}, {1, 1}, {1, 1}}},  // output_padding 0
      {{1, 2, 8, 8}, {{2, 2}, {1, 1}, {1, 1}}},  // output_padding 1
      {{1, 2, 6, 6}, {{2, 2}, {1, 1}, {2, 2}}},  // dilation 2, output_padding 1
      {{1, 2, 7, 6}, {{1, 1}, {1, 1}, {2, 2}}},  // dilation 2, stride 1
      {{1, 2, 9, 8}, {{3, 3}, {1, 1}, {1, 1}}},  // output_padding (2, 1)
      {{1, 2, 7, 8}, {{2, 1}, {1, 0}, {1, 2}}},  // per-axis options
  };
  uint64_t seed = 10;
  for (const auto& c : configs) {
    ++seed;
    Rng rng(seed);
    Net net(c.input, rng);
    const int h1 = net.relu(net.conv(net.input(), 3, 3, c.conv));
    const int h2 = net.relu(net.conv(h1, 2, 3, {{1, 1}, {1, 1}, {1, 1}}, seed % 2 == 0));
    const int out = net.linear(net.flatten(h2), 5);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.1, 0.6}) boxes.push_back(random_box(rng, c.input, radius));
    check_sound(g, boxes, seed, "conv " + seed_name(seed));
  }
}

TEST(Soundness, ResidualAdd) {
  for (uint64_t seed : {21, 22, 23}) {
    Rng rng(seed);
    Net net({1, 6}, rng);
    const int a = net.relu(net.linear(net.input(), 8));
    const int branch = net.linear(net.relu(net.linear(a, 8)), 8);
    const int r = net.relu(net.add(ops::make_add(), {branch, a}));  // residual block
    // Add of a deep branch and a branch straight from the input.
    const int s = net.add(ops::make_add(), {net.linear(r, 6), net.linear(net.input(), 6)});
    const int t = net.relu(s);
    const int doubled = net.add(ops::make_add(), {t, t});  // the same node on both sides
    const int out = net.linear(net.relu(net.linear(doubled, 6)), 3);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.4, 1.5}) boxes.push_back(random_box(rng, {1, 6}, radius));
    check_sound(g, boxes, seed, "add " + seed_name(seed));
  }
}

TEST(Soundness, SubOfBoundedBranches) {
  for (uint64_t seed : {31, 32, 33}) {
    Rng rng(seed);
    Net net({1, 6}, rng);
    const int a = net.linear(net.relu(net.linear(net.input(), 8)), 8);
    const int b = net.linear(net.relu(net.linear(net.input(), 8)), 8);
    const int r = net.relu(net.add(ops::make_sub(), {a, b}));
    const int zero = net.add(ops::make_sub(), {r, r});  // the same node on both sides
    const int s = net.add(ops::make_add(), {zero, net.linear(r, 8)});
    const int d = net.add(ops::make_sub(), {net.linear(net.input(), 8), net.relu(s)});
    const int out = net.linear(net.relu(d), 3);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.4, 1.5}) boxes.push_back(random_box(rng, {1, 6}, radius));
    check_sound(g, boxes, seed, "sub " + seed_name(seed));
  }
}

TEST(Soundness, ConstantShiftAndScale) {
  for (uint64_t seed : {41, 42}) {
    Rng rng(seed);
    {  // Image normalisation with per-channel constants, then more constants inside the network.
      Net net({1, 3, 5, 5}, rng);
      const int shifted =
          net.add(ops::make_add_const(make_param(rng.normal({1, 3, 1, 1}))), {net.input()});
      const int normed = net.add(
          ops::make_div_const(make_param(rng.with_negatives({1, 3, 1, 1}, 0.2, 2.0))), {shifted});
      const int scaled = net.add(
          ops::make_mul_const(make_param(rng.with_negatives({3, 1, 1}, 0.5, 2.0))), {normed});
      const int row_shift =
          net.add(ops::make_add_const(make_param(rng.normal({5}))), {scaled});  // last dim
      const int h = net.relu(net.conv(row_shift, 3, 3, {{1, 1}, {1, 1}, {1, 1}}));
      const int m =
          net.add(ops::make_mul_const(make_param(rng.with_negatives({1, 3, 5, 5}, 0.5, 1.5))), {h});
      const int p = net.add(ops::make_add_const(make_param(rng.normal({1, 3, 5, 5}, 0.3))), {m});
      const int h2 = net.relu(p);  // pre-activation: constants after a ReLU
      const int q =
          net.add(ops::make_div_const(make_param(rng.with_negatives({3, 1, 1}, 0.5, 2.0))), {h2});
      const int out = net.linear(net.flatten(net.relu(q)), 3);
      BoundGraph g = std::move(net).finish(out);
      std::vector<InputBox> boxes;
      for (double radius : {0.05, 0.5}) boxes.push_back(random_box(rng, {1, 3, 5, 5}, radius));
      check_sound(g, boxes, seed, "const image " + seed_name(seed));
    }
    {  // Flat input: per-feature and scalar-like constants.
      Net net({1, 6}, rng);
      const int m = net.add(ops::make_mul_const(make_param(rng.with_negatives({6}, 0.3, 2.0))),
                            {net.input()});
      const int s = net.add(ops::make_add_const(make_param(rng.normal({1, 6}))), {m});
      const int h = net.relu(net.linear(s, 8));
      const int d =
          net.add(ops::make_div_const(make_param(at::full({1}, -0.7))), {net.linear(h, 8)});
      const int e = net.add(ops::make_mul_const(make_param(at::full({1, 1}, -1.3))), {d});
      const int out = net.linear(net.relu(e), 3);
      BoundGraph g = std::move(net).finish(out);
      std::vector<InputBox> boxes;
      for (double radius : {0.05, 0.5, 2.0}) boxes.push_back(random_box(rng, {1, 6}, radius));
      check_sound(g, boxes, seed, "const flat " + seed_name(seed));
    }
  }
}

TEST(Soundness, Neg) {
  for (uint64_t seed : {51, 52, 53}) {
    Rng rng(seed);
    Net net({1, 6}, rng);
    const int n0 = net.add(ops::make_neg(), {net.input()});
    const int h1 = net.relu(net.add(ops::make_neg(), {net.linear(n0, 8)}));  // Neg pre-activation
    const int h2 = net.relu(net.add(ops::make_neg(), {net.linear(h1, 8)}));
    const int n3 = net.add(ops::make_neg(), {h2});
    const int l = net.linear(net.relu(net.linear(n3, 6)), 3);
    const int out = net.add(ops::make_neg(), {l});  // Neg as the output node
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.5, 2.0}) boxes.push_back(random_box(rng, {1, 6}, radius));
    check_sound(g, boxes, seed, "neg " + seed_name(seed));
  }
}

TEST(Soundness, BatchNorm) {
  for (uint64_t seed : {61, 62}) {
    Rng rng(seed);
    Net net({1, 3, 5, 5}, rng);
    const int b0 = net.batchnorm(net.input());
    const int h1 = net.relu(net.batchnorm(net.conv(b0, 4, 3, {{1, 1}, {1, 1}, {1, 1}})));
    const int h2 = net.relu(net.batchnorm(net.conv(h1, 4, 3, {{2, 2}, {1, 1}, {1, 1}})));
    const int h3 = net.relu(net.batchnorm(net.linear(net.flatten(h2), 6)));  // BN on [1, 6]
    const int out = net.linear(h3, 3);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.5}) boxes.push_back(random_box(rng, {1, 3, 5, 5}, radius));
    check_sound(g, boxes, seed, "batchnorm " + seed_name(seed));
  }
}

TEST(Soundness, TransposeAndReshapeInTheMiddle) {
  for (uint64_t seed : {71, 72}) {
    Rng rng(seed);
    Net net({1, 2, 4, 6}, rng);
    const int l1 = net.relu(net.linear(net.input(), 5));                   // [1, 2, 4, 5]
    const int t1 = net.add(ops::make_transpose({0, 3, 1, 2}), {l1});       // [1, 5, 2, 4]
    const int c = net.relu(net.conv(t1, 3, 3, {{1, 1}, {1, 1}, {1, 1}}));  // [1, 3, 2, 4]
    const int r1 = net.add(ops::make_reshape({4, 6}), {c});                // [1, 4, 6]
    const int l2 = net.relu(net.linear(r1, 4));                            // [1, 4, 4]
    const int t2 = net.add(ops::make_transpose({0, 2, 1}), {l2});          // [1, 4, 4], transposed
    const int l3 = net.linear_no_bias(t2, 3);                              // [1, 4, 3]
    const int t3 = net.add(ops::make_transpose({0, 2, 1}), {l3});  // [1, 3, 4]: pre-activation
    const int r2 = net.add(ops::make_reshape({12}), {net.relu(t3)});
    const int out = net.linear(r2, 3);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.5}) boxes.push_back(random_box(rng, {1, 2, 4, 6}, radius));
    check_sound(g, boxes, seed, "transpose " + seed_name(seed));
  }
  {  // Equal non-batch dims: a backward pass that applied perm instead of its inverse would keep
     // the shapes and go unnoticed but for the bounds.
    const uint64_t seed = 73;
    Rng rng(seed);
    Net net({1, 3, 3, 3}, rng);
    const int t1 = net.add(ops::make_transpose({0, 2, 3, 1}), {net.input()});
    const int h1 = net.relu(net.linear(t1, 3));  // Linear mixes the last dim
    const int t2 = net.add(ops::make_transpose({0, 3, 1, 2}), {h1});
    const int h2 = net.relu(net.add(ops::make_transpose({0, 2, 3, 1}), {net.linear(t2, 3)}));
    const int out = net.linear(net.flatten(h2), 4);
    BoundGraph g = std::move(net).finish(out);
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.5}) boxes.push_back(random_box(rng, {1, 3, 3, 3}, radius));
    check_sound(g, boxes, seed, "transpose " + seed_name(seed));
  }
}

// Bounds of element b of a batch-2 box hold for samples of that element's box; IBP and the
// tight schemes (which bound each element on its own) agree with the batch-1 boxes.
TEST(Soundness, MultiBatchBox) {
  for (uint64_t seed : {81, 82}) {
    Rng rng(seed);
    const bool conv = seed == 82;
    const std::vector<int64_t> shape =
        conv ? std::vector<int64_t>{1, 2, 7, 6} : std::vector<int64_t>{1, 6};
    Net net(shape, rng);
    int out = 0;
    if (conv) {
      const int h1 = net.relu(net.conv(net.input(), 3, 3, {{2, 2}, {1, 1}, {1, 1}}));
      const int h2 = net.relu(net.conv(h1, 2, 3, {{1, 1}, {1, 1}, {1, 1}}));
      out = net.linear(net.flatten(h2), 4);
    } else {
      const int h1 = net.relu(net.linear(net.input(), 10));
      const int h2 = net.relu(net.linear(h1, 10));
      const int h3 = net.relu(net.linear(h2, 8));
      out = net.linear(h3, 4);
    }
    BoundGraph g = std::move(net).finish(out);
    const InputBox narrow = random_box(rng, shape, 0.05);
    const InputBox wide = random_box(rng, shape, 0.8);
    const InputBox both{at::cat({narrow.lower, wide.lower}), at::cat({narrow.upper, wide.upper})};
    ASSERT_EQ(both.lower.size(0), 2);
    check_sound(g, {both}, seed, "batch-2 " + seed_name(seed));

    const Interval ibp2 = compute_bounds(g, both, Method::kIbp);
    for (int64_t b = 0; b < 2; ++b) {
      const InputBox& one = b == 0 ? narrow : wide;
      const Interval ibp1 = compute_bounds(g, one, Method::kIbp);
      const std::string what = seed_name(seed) + " batch element " + std::to_string(b);
      EXPECT_TRUE(at::allclose(ibp2.lower[b], ibp1.lower[0], 1e-5, 1e-5)) << what;
      EXPECT_TRUE(at::allclose(ibp2.upper[b], ibp1.upper[0], 1e-5, 1e-5)) << what;
    }
    // Both tight schemes bound each element on its own (kTightUnstable: rows of its own unstable
    // neurons, padded to the most any element has): its bounds are those of the element alone.
    for (const auto scheme : {IntermediateScheme::kTight, IntermediateScheme::kTightUnstable}) {
      BoundOptions tight;
      tight.scheme = scheme;
      const Interval tight2 = compute_bounds(g, both, Method::kCrown, tight);
      for (int64_t b = 0; b < 2; ++b) {
        const InputBox& one = b == 0 ? narrow : wide;
        const Interval tight1 = compute_bounds(g, one, Method::kCrown, tight);
        const std::string what = seed_name(seed) + " " + std::string(enum_name(scheme)) +
                                 " batch element " + std::to_string(b);
        EXPECT_TRUE(at::allclose(tight2.lower[b], tight1.lower[0], 1e-5, 1e-5)) << what;
        EXPECT_TRUE(at::allclose(tight2.upper[b], tight1.upper[0], 1e-5, 1e-5)) << what;
      }
    }
  }
}

TEST(Soundness, CrownSpecMatrix) {
  for (uint64_t seed : {91, 92}) {
    Rng rng(seed);
    const bool conv = seed == 92;
    const std::vector<int64_t> shape =
        conv ? std::vector<int64_t>{1, 2, 6, 6} : std::vector<int64_t>{1, 6};
    Net net(shape, rng);
    int out = 0;
    if (conv) {
      const int h1 = net.relu(net.conv(net.input(), 3, 3, {{2, 2}, {1, 1}, {1, 1}}));
      out = net.linear(net.relu(net.linear(net.flatten(h1), 8)), 5);
    } else {
      const int h1 = net.relu(net.linear(net.input(), 10));
      const int h2 = net.relu(net.linear(h1, 8));
      out = net.linear(h2, 5);
    }
    BoundGraph g = std::move(net).finish(out);
    // Random rows, a robustness-style row e0 − e3, a one-hot row and a zero row.
    at::Tensor C = rng.normal({6, 5});
    C[3].zero_();
    C[3][0] = 1.0;
    C[3][3] = -1.0;
    C[4].zero_();
    C[4][2] = 1.0;
    C[5].zero_();
    std::vector<InputBox> boxes;
    for (double radius : {0.05, 0.5, 1.5}) boxes.push_back(random_box(rng, shape, radius));
    check_sound(g, boxes, seed, "spec " + seed_name(seed), C);
  }
}

}  // namespace
}  // namespace distcrown
