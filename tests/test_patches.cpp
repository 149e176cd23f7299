// Patches-mode CROWN (ConvMode::kPatches, bounds/patches.hpp): the representation against dense
// A matrices, and every bound of a patches pass against the dense path to rounding
// (≤ 1e-5·max(1, |b|)) on random CNNs (stride, padding, dilation, BatchNorm, residual Add/Sub,
// AveragePool with counted and uncounted padding, Pad with a nonzero value, windows that outgrow
// the feature map) and on the fixture CNN and ResNet; sampled soundness.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/bounds/patches.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "fixtures.hpp"
#include "ops/add_sub.hpp"
#include "ops/avg_pool.hpp"
#include "ops/pad.hpp"
#include "random_net.hpp"
#include "sampling.hpp"

namespace distcrown {
namespace {

using testing::Net;
using testing::Rng;

// |got − want| ≤ tolerance·max(1, |want|) everywhere, both defined.
void expect_agree(const at::Tensor& got, const at::Tensor& want, const std::string& what,
                  double tolerance = 1e-5) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const at::Tensor g = got.to(at::kDouble);
  const at::Tensor w = want.to(at::kDouble);
  const at::Tensor excess = (g - w).abs() - tolerance * w.abs().clamp_min(1.0);
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": largest |patches - matrix| " << (g - w).abs().max().item<double>();
}

BoundOptions with_mode(ConvMode mode, BoundOptions o = {}) {
  o.conv_mode = mode;
  return o;
}

// Every intermediate bound and the output bounds of both modes agree; returns the patches bounds.
Interval expect_modes_agree(const BoundGraph& g, const InputBox& box, const BoundOptions& o,
                            const std::string& what) {
  c10::NoGradGuard no_grad;
  CrownEngine dense(g, box, with_mode(ConvMode::kMatrix, o));
  CrownEngine patches(g, box, with_mode(ConvMode::kPatches, o));
  dense.compute_intermediate_bounds();
  patches.compute_intermediate_bounds();
  for (int i = 1; i < g.size(); ++i) {
    if (i == g.output()) continue;
    expect_agree(patches.bounds(i).lower, dense.bounds(i).lower, what + " node " + g.node(i).name);
    expect_agree(patches.bounds(i).upper, dense.bounds(i).upper, what + " node " + g.node(i).name);
  }
  const Interval want = dense.output_bounds();
  Interval got = patches.output_bounds();
  expect_agree(got.lower, want.lower, what + " output lower");
  expect_agree(got.upper, want.upper, what + " output upper");
  return got;
}

// Samples (corners and uniform points) of the box stay inside the bounds.
void expect_sound(const BoundGraph& g, const InputBox& box, const Interval& b, Rng& rng) {
  const int64_t n = 512;
  std::vector<int64_t> shape(box.lower.sizes().begin(), box.lower.sizes().end());
  shape[0] = n;
  at::Tensor t = rng.uniform(shape);
  t.slice(0, 0, n / 2).copy_((t.slice(0, 0, n / 2) < 0.5).to(at::kFloat));  // vertices
  const at::Tensor x = box.lower + t * (box.upper - box.lower);
  const at::Tensor y = testing::outputs(g, x, {});  // [n, out]
  const double slack = 1e-5;
  EXPECT_LE((b.lower[0] - y.amin(0)).max().item<double>(), slack);
  EXPECT_LE((y.amax(0) - b.upper[0]).max().item<double>(), slack);
}

InputBox box_around(Rng& rng, const std::vector<int64_t>& shape, double eps) {
  const at::Tensor c = rng.normal(shape);
  return {c - eps, c + eps};
}

TEST(Patches, WindowsMatchDenseRows) {
  // Patches with an arbitrary geometry against their dense form: contracting with x is the same,
  // and identity patches are the one-hot rows.
  Rng rng(1);
  const int64_t C = 3;
  const int64_t H = 7;
  const int64_t W = 6;
  const at::Tensor rows = at::arange(C * H * W);
  PatchesA id = identity_patches(rows, C, H, W, 2, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor eye =
      at::eye(C * H * W).reshape({C * H * W, 1, C, H, W}).expand({-1, 2, -1, -1, -1});
  EXPECT_TRUE(at::equal(patches_to_dense(id.lA, id, H, W), eye));

  PatchesA p = id;
  p.stride = {2, 1};
  p.padding = {3, 2};
  p.lA = rng.normal({C * H * W, 2, 4, 9, 5});
  p.uA = p.lA;
  const int64_t Hn = 11;
  const int64_t Wn = 8;
  const at::Tensor dense = patches_to_dense(p.lA, p, Hn, Wn);  // [R, 2, 4, 11, 8]
  const at::Tensor x = rng.normal({2, 4, Hn, Wn});
  const at::Tensor via_windows = window_dot(p.lA, unfold_windows(x, p));
  const at::Tensor via_dense = (dense * x.unsqueeze(0)).sum({2, 3, 4});
  EXPECT_TRUE(at::allclose(via_windows, via_dense, 1e-4, 1e-5));
  // Every coefficient of a window inside the node lands in the dense row.
  const at::Tensor mask = window_mask(p, Hn, Wn, x.options());
  EXPECT_TRUE(at::allclose((p.lA * mask).sum({2, 3, 4}), dense.sum({2, 3, 4}), 1e-4, 1e-4));
}

TEST(Patches, RowWindowsReadEachRowsOwnTensor) {
  // gather_row_windows(x, index, p)[r] is row r's window of x[index[r]], zeros outside the node,
  // as unfold_windows reads a shared tensor; its gradient lands on the rows read.
  Rng rng(2);
  const int64_t C = 2;
  const int64_t H = 5;
  const int64_t W = 4;
  PatchesA p = identity_patches(at::arange(C * H * W), C, H, W, 3, {});
  p.stride = {2, 1};
  p.padding = {2, 1};
  p.lA = rng.normal({C * H * W, 3, 4, 4, 3});
  p.uA = p.lA;
  const int64_t Hn = 9;
  const int64_t Wn = 5;
  const at::Tensor x = rng.normal({6, 3, 4, Hn, Wn}).requires_grad_(true);
  const at::Tensor index = at::randint(6, {C * H * W}, at::kLong);
  const at::Tensor got = gather_row_windows(x, index, p);  // [R, 3, 4, 4, 3]
  ASSERT_EQ(got.sizes(), p.lA.sizes());
  for (int64_t r = 0; r < p.rows(); r += 7) {
    const at::Tensor want = unfold_windows(x[index[r].item<int64_t>()].detach(), p)[r];
    EXPECT_TRUE(at::equal(got[r].detach(), want)) << "row " << r;
  }
  got.sum().backward();
  const at::Tensor read = at::zeros({6}, at::kLong).index_add_(0, index, at::ones_like(index));
  for (int64_t n = 0; n < 6; ++n) {
    EXPECT_EQ(x.grad()[n].abs().sum().item<double>() > 0, read[n].item<int64_t>() > 0) << n;
  }
}

TEST(Patches, AddAlignsWindows) {
  Rng rng(2);
  const int64_t C = 2;
  const int64_t H = 6;
  const int64_t W = 6;
  PatchesA base = identity_patches(at::arange(C * H * W), C, H, W, 1, {});
  base.stride = {2, 2};
  PatchesA a = base;
  a.padding = {1, 1};
  a.lA = rng.normal({C * H * W, 1, 3, 3, 3});
  a.uA = rng.normal({C * H * W, 1, 3, 3, 3});
  PatchesA b = base;
  b.padding = {0, 2};
  b.lA = rng.normal({C * H * W, 1, 3, 1, 5});
  b.uA = rng.normal({C * H * W, 1, 3, 1, 5});
  const auto sum = add_patches(a, b);
  ASSERT_TRUE(sum.has_value());
  const int64_t Hn = 13;
  const int64_t Wn = 12;
  for (int side = 0; side < 2; ++side) {
    const auto pick = [&](const PatchesA& p) { return side == 0 ? p.lA : p.uA; };
    const at::Tensor want =
        patches_to_dense(pick(a), a, Hn, Wn) + patches_to_dense(pick(b), b, Hn, Wn);
    EXPECT_TRUE(at::allclose(patches_to_dense(pick(*sum), *sum, Hn, Wn), want, 1e-6, 1e-6));
  }
  PatchesA other_stride = b;
  other_stride.stride = {1, 2};
  EXPECT_FALSE(add_patches(a, other_stride).has_value());
}

struct CnnCase {
  const char* name;
  std::vector<int64_t> input;  // [1, C, H, W]
  // Builds the body on x; returns the last feature map (flattened into a Linear after it).
  std::function<int(Net&, int)> body;
};

ops::Conv2dOptions conv_opts(int64_t s, int64_t p, int64_t d = 1) {
  ops::Conv2dOptions o;
  o.stride = {s, s};
  o.padding = {p, p};
  o.dilation = {d, d};
  return o;
}

std::vector<CnnCase> cnn_cases() {
  return {
      {"stride_padding",
       {1, 2, 9, 9},
       [](Net& n, int x) {
         x = n.relu(n.conv(x, 4, 3, conv_opts(2, 1)));
         x = n.relu(n.conv(x, 5, 3, conv_opts(1, 1)));
         return n.relu(n.conv(x, 3, 2, conv_opts(1, 0)));
       }},
      {"dilation_no_bias",
       {1, 3, 10, 10},
       [](Net& n, int x) {
         x = n.relu(n.conv(x, 4, 3, conv_opts(1, 2, 2), false));
         return n.relu(n.conv(x, 4, 3, conv_opts(2, 1)));
       }},
      {"batchnorm",
       {1, 2, 8, 8},
       [](Net& n, int x) {
         x = n.relu(n.batchnorm(n.conv(x, 4, 3, conv_opts(1, 1))));
         x = n.relu(n.batchnorm(n.conv(x, 4, 4, conv_opts(2, 1))));
         return x;
       }},
      {"residual_add_sub",
       {1, 3, 8, 8},
       [](Net& n, int x) {
         x = n.relu(n.conv(x, 4, 3, conv_opts(1, 1)));
         const int y = n.relu(n.batchnorm(n.conv(x, 4, 3, conv_opts(1, 1))));
         const int z = n.conv(y, 4, 3, conv_opts(1, 1));
         x = n.relu(n.add(ops::make_add(), {z, x}));         // identity shortcut
         const int down = n.conv(x, 6, 1, conv_opts(2, 0));  // strided 1×1 shortcut
         const int main = n.conv(n.relu(n.conv(x, 6, 3, conv_opts(2, 1))), 6, 3, conv_opts(1, 1));
         return n.relu(n.add(ops::make_sub(), {main, down}));
       }},
      {"avgpool_pad",
       {1, 2, 10, 10},
       [](Net& n, int x) {
         x = n.relu(n.conv(x, 4, 3, conv_opts(1, 1)));
         ops::PoolWindow counted;  // 10×10 -> 5×5, every divisor 4
         counted.kernel = {2, 2};
         counted.stride = {2, 2};
         x = n.add(ops::make_average_pool(counted, true), {x});
         // left 1, right 0, top 2, bottom 1 (torch order), value 0.5: 5×5 -> 8×6
         x = n.add(ops::make_pad({1, 0, 2, 1, 0, 0}, 0.5), {x});
         x = n.relu(n.conv(x, 4, 3, conv_opts(1, 1)));
         ops::PoolWindow uncounted;  // asymmetric pads, divisors that vary: 8×6 -> 4×6
         uncounted.kernel = {3, 2};
         uncounted.stride = {2, 1};
         uncounted.pads = {1, 0, 1, 1};
         x = n.add(ops::make_average_pool(uncounted, false), {x});
         return n.relu(n.conv(x, 3, 2, conv_opts(1, 0)));
       }},
      {"windows_outgrow_map",
       {1, 2, 5, 5},
       [](Net& n, int x) {
         for (int i = 0; i < 4; ++i) x = n.relu(n.conv(x, 3, 3, conv_opts(1, 1)));
         return x;
       }},
  };
}

Interval check_case(const CnnCase& c, uint64_t seed, const BoundOptions& o,
                    const std::string& tag) {
  Rng rng(seed);
  Net n(c.input, rng);
  const int feat = c.body(n, n.input());
  const int out = n.linear(n.relu(n.linear(n.flatten(feat), 12)), 4);
  const BoundGraph g = n.finish(out);
  const InputBox box = box_around(rng, c.input, 0.1);
  Interval b = expect_modes_agree(g, box, o, std::string(c.name) + " " + tag);
  expect_sound(g, box, b, rng);
  return b;
}

TEST(Patches, RandomCnnsAgreeWithDense) {
  for (const CnnCase& c : cnn_cases()) {
    for (uint64_t seed : {11, 12}) {
      check_case(c, seed, {}, "auto_lirpa seed " + std::to_string(seed));
      BoundOptions tight;
      tight.scheme = IntermediateScheme::kTight;
      check_case(c, seed, tight, "tight seed " + std::to_string(seed));
    }
  }
}

TEST(Patches, CudaAgreesWithCpu) {
  // On a GPU the bounds must carry float32's rounding only, not TF32's (10-bit mantissa; LibTorch
  // allows it for convolutions by default, and to_device turns it off): bounds moved ~1e-3
  // relative on the H200 with LibTorch's defaults.
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device here";
  for (const CnnCase& c : cnn_cases()) {
    for (ConvMode mode : {ConvMode::kPatches, ConvMode::kMatrix}) {
      Rng rng(31);
      Net n(c.input, rng);
      const int out = n.linear(n.relu(n.linear(n.flatten(c.body(n, n.input())), 12)), 4);
      BoundGraph g = n.finish(out);
      const InputBox box = box_around(rng, c.input, 0.1);
      c10::NoGradGuard no_grad;
      const Interval cpu = compute_bounds(g, box, Method::kCrown, with_mode(mode));
      g.to_device(at::Device(at::kCUDA));
      EXPECT_FALSE(at::globalContext().allowTF32CuDNN());
      EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
      const InputBox on_gpu{box.lower.cuda(), box.upper.cuda()};
      const Interval gpu = compute_bounds(g, on_gpu, Method::kCrown, with_mode(mode));
      const std::string what =
          std::string(c.name) + (mode == ConvMode::kPatches ? " patches" : " matrix");
      expect_agree(gpu.lower.cpu(), cpu.lower, what + " lower", 1e-4);
      expect_agree(gpu.upper.cpu(), cpu.upper, what + " upper", 1e-4);
    }
  }
}

TEST(Patches, ChunkedRowsGiveTheSameBits) {
  // crown_batch_size splits a patches pass like a dense one; aligned rows make the bits equal.
  for (const CnnCase& c : cnn_cases()) {
    BoundOptions chunked;
    chunked.crown_batch_size = 16;
    const Interval a = check_case(c, 21, {}, "whole");
    const Interval b = check_case(c, 21, chunked, "chunked");
    EXPECT_TRUE(at::equal(a.lower, b.lower) && at::equal(a.upper, b.upper)) << c.name;
  }
}

TEST(Patches, PassBytesChunksRowsWithTheSameBits) {
  // crown_batch_size 0 sizes the passes by pass_bytes: a budget of 16 rows of the widest node
  // (the [2, 9, 9] input: 8 tensors of 162 floats per row) gives passes of 16 rows, and the
  // bits of every row at once, in both modes.
  const CnnCase c = cnn_cases()[0];
  for (const ConvMode mode : {ConvMode::kMatrix, ConvMode::kPatches}) {
    Rng rng(51);
    Net n(c.input, rng);
    const int out = n.linear(n.relu(n.linear(n.flatten(c.body(n, n.input())), 12)), 4);
    const BoundGraph g = n.finish(out);
    const InputBox box = box_around(rng, c.input, 0.1);
    BoundOptions all = with_mode(mode);
    all.pass_bytes = 0;
    BoundOptions small = with_mode(mode);
    small.pass_bytes = 82944;  // 16 rows × 8 tensors × 162 floats × 4 bytes
    c10::NoGradGuard no_grad;
    CrownEngine whole(g, box, all);
    CrownEngine pieces(g, box, small);
    EXPECT_EQ(whole.rows_per_pass(g.output(), 125), 125);
    EXPECT_EQ(pieces.rows_per_pass(g.output(), 125), 16);
    small.pass_bytes = 82943;  // less than 16 rows fit: still 16 (one aligned pass)
    EXPECT_EQ(CrownEngine(g, box, small).rows_per_pass(g.output(), 125), 16);
    whole.compute_intermediate_bounds();
    pieces.compute_intermediate_bounds();
    for (int i = 1; i < g.size(); ++i) {
      if (i == g.output()) continue;
      EXPECT_TRUE(at::equal(whole.bounds(i).lower, pieces.bounds(i).lower) &&
                  at::equal(whole.bounds(i).upper, pieces.bounds(i).upper))
          << g.node(i).name;
    }
  }
}

struct CountingHeartbeat final : Heartbeat {
  int64_t beats = 0;
  void beat() override { ++beats; }
};

TEST(Patches, PatchesPassBytesChunksRowsWithTheSameBits) {
  // patches_pass_bytes sizes patches passes by the largest A their first chunk (32 rows) met: a
  // budget below one row's A gives passes of 16 rows after the first. More passes (each calls
  // the checkpoint between its nodes), every bound bitwise those of one pass per start.
  for (const CnnCase& c : {cnn_cases()[0], cnn_cases()[3]}) {
    Rng rng(61);
    Net n(c.input, rng);
    const int out = n.linear(n.relu(n.linear(n.flatten(c.body(n, n.input())), 12)), 4);
    const BoundGraph g = n.finish(out);
    const InputBox box = box_around(rng, c.input, 0.1);
    CountingHeartbeat calls_whole;
    CountingHeartbeat calls_pieces;
    BoundOptions all = with_mode(ConvMode::kPatches);
    all.scheme = IntermediateScheme::kTight;  // every neuron of a start is a row
    all.patches_pass_bytes = 0;
    BoundOptions small = all;
    small.patches_pass_bytes = 1;
    c10::NoGradGuard no_grad;
    CrownEngine whole(g, box, all, PassContext::stopping_at({Deadline(), &calls_whole}));
    CrownEngine pieces(g, box, small, PassContext::stopping_at({Deadline(), &calls_pieces}));
    whole.compute_intermediate_bounds();
    pieces.compute_intermediate_bounds();
    EXPECT_GT(calls_pieces.beats, calls_whole.beats) << c.name;
    for (int i = 1; i < g.size(); ++i) {
      if (i == g.output()) continue;
      EXPECT_TRUE(at::equal(whole.bounds(i).lower, pieces.bounds(i).lower) &&
                  at::equal(whole.bounds(i).upper, pieces.bounds(i).upper))
          << c.name << " " << g.node(i).name;
    }
    expect_sound(g, box, pieces.output_bounds(at::Tensor(), true, true), rng);
  }
}

TEST(Patches, Float64AgreesWithDense) {
  const CnnCase c = cnn_cases()[3];
  Rng rng(31);
  Net n(c.input, rng);
  const int out = n.linear(n.flatten(c.body(n, n.input())), 3);
  BoundGraph g = n.finish(out);
  g.to_dtype(at::kDouble);
  InputBox box = box_around(rng, c.input, 0.05);
  box = {box.lower.to(at::kDouble), box.upper.to(at::kDouble)};
  (void)expect_modes_agree(g, box, {}, "float64");
}

TEST(Patches, AlphaCrownAgreesWithDense) {
  // α-CROWN reads each row's α at its window: the first iterations of each side follow dense
  // A's path and agree to rounding. Later ones need not: Adam's normalised step turns a
  // rounding-sized gradient (or a rounding-sized difference in the reference bounds the lower
  // side starts from) into a step of size lr, and the paths part (dilation_no_bias, lower side
  // alone: ≤ 5e-7 through iteration 18, 1.9e-5 at 20; stride_padding, both sides: 4e-5 from
  // iteration 9 of the lower side). The default run is held to soundness and to
  // 1e-3·max(1, |b|) of dense, not to rounding.
  for (const CnnCase& c : cnn_cases()) {
    Rng rng(41);
    Net n(c.input, rng);
    const int out = n.linear(n.relu(n.linear(n.flatten(c.body(n, n.input())), 12)), 3);
    const BoundGraph g = n.finish(out);
    const InputBox box = box_around(rng, c.input, 0.1);
    const auto side = [&](ConvMode mode, bool lower) {
      AlphaOptions first;
      first.iterations = 8;
      return alpha_crown(first.with_bound(with_mode(mode))
                             .sided(lower ? BoundSides::kLower : BoundSides::kUpper),
                         {}, g, box)
          .bounds;
    };
    expect_agree(side(ConvMode::kPatches, true).lower, side(ConvMode::kMatrix, true).lower,
                 std::string(c.name) + " alpha lower");
    expect_agree(side(ConvMode::kPatches, false).upper, side(ConvMode::kMatrix, false).upper,
                 std::string(c.name) + " alpha upper");
    const Interval d = compute_bounds(g, box, Method::kAlphaCrown, with_mode(ConvMode::kMatrix));
    const Interval p = compute_bounds(g, box, Method::kAlphaCrown, with_mode(ConvMode::kPatches));
    expect_agree(p.lower, d.lower, std::string(c.name) + " two-sided alpha lower", 1e-3);
    expect_agree(p.upper, d.upper, std::string(c.name) + " two-sided alpha upper", 1e-3);
    expect_sound(g, box, p, rng);
  }
}

class PatchesFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(PatchesFixture, CrownAgreesWithDenseAndReference) {
  DISTCROWN_REQUIRE_FIXTURES();
  const std::filesystem::path f = testing::fixtures_dir() / "refs" / (GetParam() + ".json");
  const nlohmann::json ref = testing::read_json(f);
  const BoundGraph g =
      io::load_onnx((testing::fixtures_dir() / ref["model"].get<std::string>()).string());
  const InputBox box = testing::reference_box(ref);
  const Interval b = expect_modes_agree(g, box, {}, GetParam());
  const auto lo = ref["crown"]["lower"].get<std::vector<double>>();
  const auto hi = ref["crown"]["upper"].get<std::vector<double>>();
  ASSERT_EQ(b.lower.numel(), int64_t(lo.size()));
  for (size_t i = 0; i < lo.size(); ++i) {
    EXPECT_NEAR(b.lower.reshape({-1})[int64_t(i)].item<double>(), lo[i],
                std::max(1e-4 * std::abs(lo[i]), 1e-5));
    EXPECT_NEAR(b.upper.reshape({-1})[int64_t(i)].item<double>(), hi[i],
                std::max(1e-4 * std::abs(hi[i]), 1e-5));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PatchesFixture,
                         ::testing::Values("oval21_base_img2578", "oval21_base_img8194",
                                           "cifar10_resnet_2b_prop_0", "cifar10_resnet_2b_prop_1"));

}  // namespace
}  // namespace distcrown
