// Pooling and padding operators (ops/avg_pool, ops/max_pool, ops/pad) beyond the op harness:
//   MaxPool     the relaxation equals an independent per-window loop of auto_LiRPA's rule (i* the
//               first largest lower bound; linear when l_i* >= every other u_j, else the constant
//               max u) on ties, zero-width, very wide and post-ReLU intervals, for overlapping
//               windows, padding and stride != kernel; and it is sound by sampling: for x in the
//               input bounds, lA·x + lbias <= A·maxpool(x) <= uA·x + ubias
//   linear ops  AveragePool (padding counted or not), GlobalAveragePool and Pad (nonzero value,
//               cropping): the backward step is exactly the affine map (Σ A·f(x) = Σ A'·x + bias
//               at random x), the forward matches a loop over the windows
//   ONNX        Pad's attribute and input forms, axes, folding of constants; AveragePool's
//               count_include_pad default; one-line refusals of what is not implemented
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/util/error.hpp"
#include "linear_op_checks.hpp"
#include "onnx_builder.hpp"
#include "ops/avg_pool.hpp"
#include "ops/max_pool.hpp"
#include "ops/pad.hpp"
#include "random_net.hpp"
#include "sampling.hpp"

namespace distcrown {
namespace {

using ops::PoolWindow;
using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::backward_step;
using testing::expect_affine_step;
using testing::expect_near;
using testing::expect_refused;
using testing::fmt;
using testing::OnnxBuilder;
using testing::op_of;
using testing::pair;
using testing::points_in;
using testing::random_a;
using testing::Rng;
using testing::single_op;
using testing::Step;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// MaxPool

// The windows the tests run: non-overlapping, overlapping with asymmetric padding, stride above
// the kernel, overlapping with symmetric padding, 1x1, a rectangular kernel.
std::vector<PoolWindow> windows() {
  return {{{2, 2}, {2, 2}, {0, 0, 0, 0}}, {{3, 3}, {1, 1}, {1, 0, 1, 1}},
          {{2, 2}, {3, 3}, {0, 0, 0, 0}}, {{3, 3}, {2, 2}, {1, 1, 1, 1}},
          {{1, 1}, {1, 1}, {0, 0, 0, 0}}, {{2, 3}, {1, 2}, {0, 1, 1, 2}}};
}

std::string describe(const PoolWindow& w) {
  return "kernel " + std::to_string(w.kernel[0]) + "x" + std::to_string(w.kernel[1]) + " stride " +
         std::to_string(w.stride[0]) + "," + std::to_string(w.stride[1]) + " pads " +
         std::to_string(w.pads[0]) + "," + std::to_string(w.pads[1]) + "," +
         std::to_string(w.pads[2]) + "," + std::to_string(w.pads[3]);
}

struct NamedBounds {
  std::string name;
  Interval bounds;  // [1, C, H, W] float64
};

// Input bounds that stress the relaxation's choices.
std::vector<NamedBounds> interval_kinds(Rng& rng, const std::vector<int64_t>& shape) {
  const auto dbl = [](const at::Tensor& t) { return t.to(at::kDouble); };
  std::vector<NamedBounds> out;
  {  // Integer bounds from a small set: many windows where lower (and upper) bounds tie.
    const at::Tensor l = dbl(at::floor(rng.uniform(shape) * 3) - 1);
    const at::Tensor w = dbl(at::floor(rng.uniform(shape) * 3));
    out.push_back({"ties", {l, l + w}});
  }
  {  // Zero width everywhere, values from a small set (ties of l = u among window elements).
    const at::Tensor v = dbl(at::floor(rng.uniform(shape) * 4));
    out.push_back({"zero width", {v, v.clone()}});
  }
  {  // A quarter of zero width, the rest ordinary.
    const at::Tensor c = dbl(rng.normal(shape));
    const at::Tensor r =
        at::where(rng.uniform(shape) < 0.25, at::zeros_like(c), dbl(rng.uniform(shape)) * 0.5);
    out.push_back({"some zero width", {c - r, c + r}});
  }
  {  // Very wide: radii up to 1e3 around N(0, 1) centres.
    const at::Tensor c = dbl(rng.normal(shape));
    const at::Tensor r = dbl(rng.uniform(shape)) * 1e3;
    out.push_back({"very wide", {c - r, c + r}});
  }
  {  // After a ReLU: half the lower bounds exactly 0.
    const at::Tensor l = at::relu(dbl(rng.normal(shape)));
    out.push_back({"post-ReLU", {l, l + dbl(rng.uniform(shape))}});
  }
  {  // Narrow and separated: many windows where one input dominates (linear).
    const at::Tensor c = dbl(rng.normal(shape)) * 10;
    const at::Tensor r = dbl(rng.uniform(shape)) * 0.01;
    out.push_back({"dominated", {c - r, c + r}});
  }
  return out;
}

// auto_LiRPA's rule for each window, by loops (independent of the operator's tensor code).
Step reference_max_pool_step(const PoolWindow& w, const at::Tensor& A, const Interval& in) {
  const int64_t S = A.size(0);
  const int64_t C = in.lower.size(1);
  const int64_t H = in.lower.size(2);
  const int64_t W = in.lower.size(3);
  const int64_t Ho = A.size(3);
  const int64_t Wo = A.size(4);
  const auto l = in.lower.accessor<double, 4>();
  const auto u = in.upper.accessor<double, 4>();
  const auto a = A.accessor<double, 5>();
  Step r{at::zeros({S, 1, C, H, W}, at::kDouble), at::zeros({S, 1, C, H, W}, at::kDouble),
         at::zeros({S, 1}, at::kDouble), at::zeros({S, 1}, at::kDouble)};
  auto lA = r.lA.accessor<double, 5>();
  auto uA = r.uA.accessor<double, 5>();
  auto lb = r.lbias.accessor<double, 2>();
  auto ub = r.ubias.accessor<double, 2>();
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        // The window's input elements in row-major order (padding skipped).
        std::vector<std::pair<int64_t, int64_t>> elems;
        for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
          for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
            const int64_t h = oh * w.stride[0] + kh - w.pads[0];
            const int64_t x = ow * w.stride[1] + kw - w.pads[1];
            if (h >= 0 && h < H && x >= 0 && x < W) elems.emplace_back(h, x);
          }
        }
        size_t best = 0;
        for (size_t j = 1; j < elems.size(); ++j) {
          if (l[0][c][elems[j].first][elems[j].second] >
              l[0][c][elems[best].first][elems[best].second]) {
            best = j;
          }
        }
        double others = -kInf;
        double top = -kInf;
        for (size_t j = 0; j < elems.size(); ++j) {
          const double uj = u[0][c][elems[j].first][elems[j].second];
          top = std::max(top, uj);
          if (j != best) others = std::max(others, uj);
        }
        const auto [bh, bw] = elems[best];
        const bool linear = l[0][c][bh][bw] >= others;
        for (int64_t s = 0; s < S; ++s) {
          const double v = a[s][0][c][oh][ow];
          // Lower side: A >= 0 takes y >= x_i*; A < 0 the upper line.
          lA[s][0][c][bh][bw] += v >= 0 || linear ? v : 0.0;
          if (v < 0 && !linear) lb[s][0] += v * top;
          // Upper side: A <= 0 takes y >= x_i*; A > 0 the upper line.
          uA[s][0][c][bh][bw] += v <= 0 || linear ? v : 0.0;
          if (v > 0 && !linear) ub[s][0] += v * top;
        }
      }
    }
  }
  return r;
}

TEST(MaxPool, RelaxationIsAutoLirpasRulePerWindowAndSound) {
  c10::NoGradGuard no_grad;
  const std::vector<int64_t> shape{1, 2, 7, 6};
  Rng rng(2024);
  for (const PoolWindow& w : windows()) {
    const BoundGraph g = single_op(shape, ops::make_max_pool(w));
    const BoundNode& op = op_of(g);
    const std::vector<int64_t> out(g.output_shape().begin() + 1, g.output_shape().end());
    for (const NamedBounds& nb : interval_kinds(rng, shape)) {
      const std::string what = describe(w) + ", " + nb.name;
      SCOPED_TRACE(what);
      const at::Tensor A = random_a(rng, 5, out);
      const Step got = backward_step(op, A, &nb.bounds);
      const Step want = reference_max_pool_step(w, A, nb.bounds);
      expect_near(got.lA, want.lA, "lA");
      expect_near(got.uA, want.uA, "uA");
      expect_near(got.lbias, want.lbias, "lower bias");
      expect_near(got.ubias, want.ubias, "upper bias");
      if (!w.overlapping()) {
        // Each input element gets at most one window's coefficient: exactly A or 0.
        EXPECT_TRUE(at::equal(got.lA, want.lA));
        EXPECT_TRUE(at::equal(got.uA, want.uA));
      }

      // Sound at points of the input bounds: lA·x + lbias <= A·y <= uA·x + ubias.
      const at::Tensor x = points_in(rng, nb.bounds, 512);
      const at::Tensor y = g.forward(x);
      const at::Tensor f = pair(A, y);
      const at::Tensor lo = pair(got.lA, x) + got.lbias.reshape({1, -1});
      const at::Tensor hi = pair(got.uA, x) + got.ubias.reshape({1, -1});
      const double tol = 1e-12 * std::max(1.0, f.abs().max().item<double>());
      EXPECT_LE((lo - f).max().item<double>(), tol) << "lower line above the function";
      EXPECT_LE((f - hi).max().item<double>(), tol) << "upper line below the function";

      // IBP is the max-pool of each bound, and contains every sample.
      const Interval ibp = op.ibp(std::vector<const Interval*>{&nb.bounds});
      EXPECT_TRUE(at::equal(ibp.lower, g.forward(nb.bounds.lower)));
      EXPECT_TRUE(at::equal(ibp.upper, g.forward(nb.bounds.upper)));
      EXPECT_TRUE((y >= ibp.lower).all().item<bool>());
      EXPECT_TRUE((y <= ibp.upper).all().item<bool>());
    }
  }
}

// α-CROWN's window weights: the initial parameters give CROWN's step, and any weights the
// optimiser may reach, once projected, lie on the simplex over each window's real elements
// (padding gets 0) and give sound bounds at sampled points, for every window geometry.
TEST(MaxPool, ProjectedWindowWeightsStartAtCrownAndStaySound) {
  c10::NoGradGuard no_grad;
  const std::vector<int64_t> shape{1, 2, 7, 6};
  Rng rng(77);
  const int64_t S = 5;
  for (const PoolWindow& w : windows()) {
    const BoundGraph g = single_op(shape, ops::make_max_pool(w));
    const BoundNode& op = op_of(g);
    ASSERT_TRUE(op.traits().relaxation_params);
    const std::vector<int64_t> out(g.output_shape().begin() + 1, g.output_shape().end());
    for (const NamedBounds& nb : interval_kinds(rng, shape)) {
      const std::string what = describe(w) + ", " + nb.name;
      SCOPED_TRACE(what);
      const at::Tensor A = random_a(rng, S, out);
      const at::Tensor init = op.initial_relaxation_params(nb.bounds);  // [K, 1, C, Ho, Wo]
      std::vector<int64_t> full{2, S};
      full.insert(full.end(), init.sizes().begin(), init.sizes().end());
      const std::vector<const Interval*> in{&nb.bounds};
      const auto relaxed_step = [&](const at::Tensor& alpha) {
        BiasPair bias;
        const auto o = op.backward_relaxed({A, A}, in, bias, alpha_params(alpha[0], alpha[1]));
        return Step{o[0].lA, o[0].uA, bias.lower, bias.upper};
      };
      at::Tensor alpha = init.unsqueeze(0).unsqueeze(0).expand(full).clone();
      op.project_relaxation_params(alpha, nb.bounds);
      EXPECT_TRUE(at::equal(alpha, init.unsqueeze(0).unsqueeze(0).expand(full)))
          << "one-hot weights are on the simplex already";
      const Step crown = backward_step(op, A, &nb.bounds);
      const Step start = relaxed_step(alpha);
      expect_near(start.lA, crown.lA, "initial lA");
      expect_near(start.uA, crown.uA, "initial uA");
      for (const double spread : {0.2, 3.0}) {
        alpha = alpha + spread * rng.normal(full).to(at::kDouble);
        op.project_relaxation_params(alpha, nb.bounds);
        const at::Tensor sums = alpha.sum(2);
        EXPECT_LE((sums - 1).abs().max().item<double>(), 1e-12) << "weights sum to 1";
        EXPECT_GE(alpha.min().item<double>(), 0.0);
        const Step s = relaxed_step(alpha);
        const at::Tensor x = points_in(rng, nb.bounds, 512);
        const at::Tensor f = pair(A, g.forward(x));
        const at::Tensor lo = pair(s.lA, x) + s.lbias.reshape({1, -1});
        const at::Tensor hi = pair(s.uA, x) + s.ubias.reshape({1, -1});
        const double tol = 1e-12 * std::max(1.0, f.abs().max().item<double>());
        EXPECT_LE((lo - f).max().item<double>(), tol) << "lower line above, spread " << spread;
        EXPECT_LE((f - hi).max().item<double>(), tol) << "upper line below, spread " << spread;
      }
    }
  }
}

// Where the inputs tie exactly (equal bounds, zero width), the window is linear in i* and the
// bounds are exact: CROWN over a box with every element of a window equal gives that value.
TEST(MaxPool, TiedZeroWidthWindowsAreExact) {
  c10::NoGradGuard no_grad;
  const BoundGraph g = single_op({1, 1, 4, 4}, ops::make_max_pool({{2, 2}, {2, 2}, {0, 0, 0, 0}}));
  // Windows: all 1.5; all 1.5 but one point interval [1.5, 1.5] and one [-1, 1.5]; a strict max.
  at::Tensor lo = at::full({1, 1, 4, 4}, 1.5, at::kDouble);
  at::Tensor hi = lo.clone();
  lo[0][0][0][2] = -1;  // window (0, 1): [1.5, 1.5] x 3 and [-1, 1.5]
  lo[0][0][2][0] = 3;   // window (1, 0): one input dominates
  hi[0][0][2][0] = 4;
  const Interval box{lo, hi};
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  const at::Tensor want_lo = at::tensor({1.5, 1.5, 3.0, 1.5}, at::kDouble);
  const at::Tensor want_hi = at::tensor({1.5, 1.5, 4.0, 1.5}, at::kDouble);
  EXPECT_TRUE(at::equal(crown.lower.reshape({-1}), want_lo)) << crown.lower;
  EXPECT_TRUE(at::equal(crown.upper.reshape({-1}), want_hi)) << crown.upper;
}

// α-CROWN through MaxPools (their window weights, and the ReLU slopes before them through their
// input bounds): sound at sampled points, never looser than CROWN.
TEST(MaxPool, AlphaCrownThroughItIsSoundAndNoLooserThanCrown) {
  Rng rng(6);
  testing::Net n({1, 2, 7, 7}, rng);
  const int c1 = n.relu(n.conv(n.input(), 3, 3, {{1, 1}, {1, 1}, {1, 1}}));
  const int p1 = n.add(ops::make_max_pool({{3, 3}, {1, 1}, {1, 0, 1, 1}}), {c1});  // overlapping
  const int c2 = n.conv(p1, 3, 2, {});  // a MaxPool fed by a Conv: a non-ReLU pre-activation
  const int p2 = n.add(ops::make_max_pool({{2, 2}, {2, 2}, {0, 0, 0, 0}}), {c2});
  const BoundGraph g = n.finish(n.linear(n.relu(n.linear(n.flatten(p2), 6)), 3));
  const at::Tensor centre = rng.normal({1, 2, 7, 7});
  const InputBox box{centre - 0.3, centre + 0.3};
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  AlphaOptions ao;
  ao.iterations = 10;
  const Interval alpha = alpha_crown(ao, {}, g, box).bounds;
  const double tol = 1e-4;
  EXPECT_GE((alpha.lower - crown.lower).min().item<double>(), -tol);
  EXPECT_LE((alpha.upper - crown.upper).max().item<double>(), tol);
  EXPECT_TRUE(at::isfinite(alpha.lower).all().item<bool>());
  c10::NoGradGuard no_grad;
  const Interval b{box.lower.to(at::kDouble), box.upper.to(at::kDouble)};
  const at::Tensor y = testing::outputs(g, points_in(rng, b, 2000).to(at::kFloat), {});
  EXPECT_LE((alpha.lower - y).max().item<double>(), tol) << "alpha-CROWN lower above a sample";
  EXPECT_LE((y - alpha.upper).max().item<double>(), tol) << "alpha-CROWN upper below a sample";
  EXPECT_LE((crown.lower - y).max().item<double>(), tol) << "CROWN lower above a sample";
  EXPECT_LE((y - crown.upper).max().item<double>(), tol) << "CROWN upper below a sample";
}

// ---------------------------------------------------------------------------------------------
// AveragePool, GlobalAveragePool, Pad: affine maps.

// The backward step is the map: Σ A·f(x) = Σ A'·x + bias at random x, both sides, and IBP holds
// f at the points of the box.
// AveragePool by loops: the sum of the window's input elements over kH·kW (padding counted) or
// over their number.
at::Tensor reference_avg_pool(const at::Tensor& x, const PoolWindow& w, bool count_pad) {
  const auto [Ho, Wo] = w.output_size(x.size(2), x.size(3));
  at::Tensor y = at::zeros({x.size(0), x.size(1), Ho, Wo}, at::kDouble);
  const auto xa = x.accessor<double, 4>();
  auto ya = y.accessor<double, 4>();
  for (int64_t n = 0; n < x.size(0); ++n) {
    for (int64_t c = 0; c < x.size(1); ++c) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double sum = 0;
          int64_t count = 0;
          for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
            for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
              const int64_t h = oh * w.stride[0] + kh - w.pads[0];
              const int64_t v = ow * w.stride[1] + kw - w.pads[1];
              if (h < 0 || h >= x.size(2) || v < 0 || v >= x.size(3)) continue;
              sum += xa[n][c][h][v];
              ++count;
            }
          }
          ya[n][c][oh][ow] = sum / double(count_pad ? w.kernel[0] * w.kernel[1] : count);
        }
      }
    }
  }
  return y;
}

TEST(AveragePool, ForwardMatchesLoopsAndBackwardIsTheAdjoint) {
  c10::NoGradGuard no_grad;
  Rng rng(77);
  const std::vector<int64_t> shape{1, 2, 7, 6};
  for (const PoolWindow& w : windows()) {
    for (const bool count_pad : {true, false}) {
      const std::string what = describe(w) + (count_pad ? ", padding counted" : ", not counted");
      const BoundGraph g = single_op(shape, ops::make_average_pool(w, count_pad));
      const at::Tensor x = rng.normal({3, 2, 7, 6}).to(at::kDouble);
      const at::Tensor y = g.forward(x);
      const at::Tensor want = reference_avg_pool(x, w, count_pad);
      ASSERT_EQ(y.sizes(), want.sizes()) << what;
      EXPECT_LE((y - want).abs().max().item<double>(), 1e-14) << what;
      expect_affine_step(g, rng, what);
    }
  }
}

TEST(GlobalAveragePool, BackwardIsTheAdjoint) {
  c10::NoGradGuard no_grad;
  Rng rng(78);
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 3, 4, 5}, {1, 2, 7}, {1, 2, 3, 2, 2}}) {
    const BoundGraph g = single_op(shape, ops::make_global_average_pool());
    std::vector<int64_t> want(shape.begin(), shape.begin() + 2);
    want.resize(shape.size(), 1);
    EXPECT_EQ(g.output_shape(), want);
    expect_affine_step(g, rng, std::to_string(shape.size()) + "-D");
  }
}

TEST(Pad, NonzeroValueAndCroppingAreAffineAndExact) {
  c10::NoGradGuard no_grad;
  Rng rng(79);
  struct PadCase {
    std::vector<int64_t> pads;
    double value;
  };
  // On [1, 2, 3, 4]: pads for (last dim begin, end, dim 2 ..., dim 1 ...).
  for (const PadCase& p : {PadCase{{1, 2, 0, 1}, 0.0}, PadCase{{1, 2, 0, 1}, -2.5},
                           PadCase{{2, -1, -1, 1, 1, 0}, 0.7}, PadCase{{-1, -2, -1, 0}, 3.0}}) {
    const BoundGraph g = single_op({1, 2, 3, 4}, ops::make_pad(p.pads, p.value));
    const std::string what = "value " + fmt(p.value) + ", " + std::to_string(p.pads.size()) +
                             " pads starting " + std::to_string(p.pads[0]);
    const at::Tensor x = rng.normal({2, 2, 3, 4}).to(at::kDouble);
    EXPECT_TRUE(at::equal(g.forward(x), at::constant_pad_nd(x, p.pads, p.value))) << what;
    expect_affine_step(g, rng, what);
    // IBP is exact: the pad of each bound.
    const Interval box{x.slice(0, 0, 1), x.slice(0, 0, 1) + 1};
    const Interval ibp = compute_bounds(g, box, Method::kIbp);
    const Interval crown = compute_bounds(g, box, Method::kCrown);
    const at::Tensor lo = at::constant_pad_nd(box.lower, p.pads, p.value).reshape({1, -1});
    const at::Tensor hi = at::constant_pad_nd(box.upper, p.pads, p.value).reshape({1, -1});
    EXPECT_TRUE(at::equal(ibp.lower, lo)) << what;
    EXPECT_TRUE(at::equal(ibp.upper, hi)) << what;
    EXPECT_LE((crown.lower - lo).abs().max().item<double>(), 1e-12) << what;
    EXPECT_LE((crown.upper - hi).abs().max().item<double>(), 1e-12) << what;
  }
}

// ---------------------------------------------------------------------------------------------
// ONNX import

BoundGraph load(const OnnxBuilder& b) { return io::load_onnx_bytes(b.bytes(), "pool.onnx"); }

TEST(PoolingOnnx, PadAttributeAndInputForms) {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({1, 2, 3, 4});
  // ONNX pads: begins of every axis, then ends: [0, 1, 0, 2, 0, 0, 1, -1].
  const std::vector<int64_t> onnx_pads{0, 1, 0, 2, 0, 0, 1, -1};
  const std::vector<int64_t> torch_pads{2, -1, 0, 1, 1, 0};
  {
    OnnxBuilder b;  // opset 9: attributes
    b.model().opset = 9;
    b.input("x", {1, 2, 3, 4}).output("y");
    b.node("pad", "Pad", {"x"}, {"y"}, {attr_ints("pads", onnx_pads), attr_float("value", 0.25)});
    EXPECT_TRUE(at::equal(load(b).forward(x), at::constant_pad_nd(x, torch_pads, 0.25)));
  }
  {
    OnnxBuilder b;  // opset 13: pads and constant_value inputs
    b.input("x", {1, 2, 3, 4}).output("y");
    b.initializer("pads", at::tensor(onnx_pads, at::kLong));
    b.initializer("value", at::scalar_tensor(-1.5, at::kFloat));
    b.node("pad", "Pad", {"x", "pads", "value"}, {"y"}, {attr_string("mode", "constant")});
    EXPECT_TRUE(at::equal(load(b).forward(x), at::constant_pad_nd(x, torch_pads, -1.5)));
  }
  {
    OnnxBuilder b;  // opset 18: axes (the last two dims only; negative axis)
    b.model().opset = 18;
    b.input("x", {1, 2, 3, 4}).output("y");
    b.initializer("pads", at::tensor(std::vector<int64_t>{1, 0, 0, 2}, at::kLong));
    b.initializer("axes", at::tensor(std::vector<int64_t>{-1, 2}, at::kLong));
    b.node("pad", "Pad", {"x", "pads", "", "axes"}, {"y"});
    // Last dim: begin 1, end 0; dim 2: begin 0, end 2.
    EXPECT_TRUE(at::equal(load(b).forward(x), at::constant_pad_nd(x, {1, 0, 0, 2}, 0)));
  }
  {
    OnnxBuilder b;  // a Pad of constants is folded at import: y = x + pad(c)
    b.input("x", {1, 2, 3, 5}).output("y");
    const at::Tensor c = at::randn({1, 2, 3, 4});
    b.initializer("c", c);
    b.initializer("pads", at::tensor(std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1}, at::kLong));
    b.node("pad", "Pad", {"c", "pads"}, {"cp"});
    b.node("add", "Add", {"x", "cp"}, {"y"});
    const BoundGraph g = load(b);
    EXPECT_EQ(g.size(), 2);  // the input and Add (of a constant): no Pad node
    const at::Tensor xx = at::randn({1, 2, 3, 5});
    EXPECT_TRUE(at::allclose(g.forward(xx), xx + at::constant_pad_nd(c, {0, 1}, 0)));
  }
}

TEST(PoolingOnnx, AveragePoolDefaultsToPaddingNotCounted) {
  c10::NoGradGuard no_grad;
  OnnxBuilder b;
  b.input("x", {1, 2, 5, 5}).output("y");
  b.node("avg", "AveragePool", {"x"}, {"y"},
         {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}),
          attr_ints("pads", {1, 1, 1, 1})});
  BoundGraph g = load(b);
  g.to_dtype(at::kDouble);
  const at::Tensor x = at::randn({2, 2, 5, 5}, at::kDouble);
  const PoolWindow w{{3, 3}, {2, 2}, {1, 1, 1, 1}};
  EXPECT_LE((g.forward(x) - reference_avg_pool(x, w, false)).abs().max().item<double>(), 1e-14);
}

TEST(PoolingOnnx, MaxPoolAndGlobalAveragePoolLoad) {
  c10::NoGradGuard no_grad;
  OnnxBuilder b;
  b.input("x", {1, 2, 6, 6}).output("y");
  // The Indices output is declared but not used: that is fine.
  b.node("max", "MaxPool", {"x"}, {"m", "idx"},
         {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2}),
          attr_int("storage_order", 0)});
  b.node("gap", "GlobalAveragePool", {"m"}, {"y"});
  const BoundGraph g = load(b);
  const at::Tensor x = at::randn({1, 2, 6, 6});
  EXPECT_TRUE(at::allclose(g.forward(x), at::max_pool2d(x, {2, 2}, {2, 2}).mean({2, 3}, true)));
}

TEST(PoolingOnnx, UnimplementedVariantsAreRefusedInOneLine) {
  const auto pool = [](const std::string& op, std::vector<io::OnnxAttribute> attrs,
                       std::vector<int64_t> in = {1, 2, 6, 6}) {
    OnnxBuilder b;
    b.input("x", std::move(in)).output("y");
    attrs.push_back(attr_ints("kernel_shape", {2, 2}));
    b.node("p", op, {"x"}, {"y"}, std::move(attrs));
    return b;
  };
  for (const char* op : {"AveragePool", "MaxPool"}) {
    expect_refused(pool(op, {attr_int("ceil_mode", 1)}), {"pool.onnx", "'p'", op, "ceil_mode"});
    expect_refused(pool(op, {attr_string("auto_pad", "SAME_UPPER")}), {op, "SAME_UPPER"});
    expect_refused(pool(op, {attr_ints("dilations", {2, 2})}), {op, "dilations"});
    expect_refused(pool(op, {attr_ints("pads", {2, 0, 0, 0})}), {op, "pads"});
    expect_refused(pool(op, {}, {1, 2, 6}), {op, "3-D"});
  }
  {
    OnnxBuilder b;  // MaxPool's Indices used by a later node
    b.input("x", {1, 2, 6, 6}).output("y");
    b.node("max", "MaxPool", {"x"}, {"m", "idx"}, {attr_ints("kernel_shape", {2, 2})});
    b.node("cast", "Cast", {"idx"}, {"y"}, {attr_int("to", 1)});
    expect_refused(b, {"'cast'", "output 1", "'idx'", "'max'", "MaxPool"});
  }
  {
    OnnxBuilder b;
    b.input("x", {1, 2, 3}).output("y");
    b.initializer("pads", at::tensor(std::vector<int64_t>{0, 0, 1, 0, 0, 1}, at::kLong));
    b.node("pad", "Pad", {"x", "pads"}, {"y"}, {attr_string("mode", "reflect")});
    expect_refused(b, {"'pad'", "mode=reflect"});
  }
  {
    OnnxBuilder b;
    b.input("x", {1, 2, 3}).output("y");
    b.initializer("pads", at::tensor(std::vector<int64_t>{1, 0, 0, 0, 0, 0}, at::kLong));
    b.node("pad", "Pad", {"x", "pads"}, {"y"});
    expect_refused(b, {"'pad'", "batch"});
  }
}

}  // namespace
}  // namespace distcrown
