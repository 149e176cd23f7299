#include "ops/conv.hpp"

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/affine.hpp"
#include "ops/reshape.hpp"

namespace distcrown::ops {
namespace {

// The adjoint of conv2d, x [N, C_out, h, w] -> [N, C_in, ...]. conv_transpose2d runs oneDNN's
// backward kernel on the CPU, which is slow when the convolution has one to three input channels
// (an image model's first layer) and is strided or has 32 or more output channels: LibTorch's
// own im2col kernel (slow_conv_transpose2d) took 0.13–0.93× its time on such shapes for 1–300
// rows, 0.95–1.19× at stride 1 with 8–16 output channels, and up to 12× (10–300 rows) from four
// input channels on (benchmarks/bench_conv_transpose.py, docs/results.md). The choice depends on
// shapes alone, so every run and every rank computes the same bits.
at::Tensor transposed_conv(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef output_padding,
                           at::IntArrayRef dilation) {
  constexpr int64_t kFewInputChannels = 3;
  constexpr int64_t kManyOutputChannels = 32;
  const bool strided = stride[0] > 1 || stride[1] > 1;
  if (x.is_cpu() && w.size(1) <= kFewInputChannels &&
      (strided || w.size(0) >= kManyOutputChannels)) {
    return at::slow_conv_transpose2d(x, w, {w.size(2), w.size(3)}, {}, stride, padding,
                                     output_padding, dilation);
  }
  return at::conv_transpose2d(x, w, {}, stride, padding, output_padding, 1, dilation);
}

class BoundConv2d final : public AffineOp {
 public:
  BoundConv2d(ParamPtr w, ParamPtr b, Conv2dOptions o)
      : AffineOp(std::move(w), std::move(b)), o_(o) {}
  std::string op_type() const override { return "Conv"; }
  OpTraits traits() const override {
    return {.affine = true, .mixes_elements = true, .patches = true};
  }

  // Patches on the output, windows [R, B, C_out, kh, kw], become patches on the input: each window
  // (masked to the output, whose outside is the next layer's zero padding) goes through the
  // transposed convolution, giving [R, B, C_in, (kh−1)·s + d·(k−1) + 1, ...]; the window anchor
  // moves to stride·s and padding·s + p.
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& bias_acc) const override {
    const at::Tensor w = weight();
    const at::Tensor b = bias();
    const auto& out_shape = output_shape();  // [1, C_out, H_out, W_out]
    const at::Tensor mask = window_mask(a, out_shape[2], out_shape[3], a.any().options());
    PatchesA res = a;
    for (size_t k = 0; k < 2; ++k) {
      res.stride[k] = a.stride[k] * o_.stride[k];
      res.padding[k] = a.padding[k] * o_.stride[k] + o_.padding[k];
    }
    const auto side = [&](const at::Tensor& A, std::initializer_list<at::Tensor*> biases) {
      const at::Tensor masked = A * mask;
      if (b.defined()) {
        const at::Tensor term = at::matmul(masked.sum({3, 4}), b);  // [R, B]
        for (at::Tensor* acc : biases) accumulate(*acc, term);
      }
      const int64_t R = A.size(0);
      const int64_t B = A.size(1);
      const at::Tensor flat = masked.reshape({R * B, A.size(2), A.size(3), A.size(4)});
      const at::Tensor t = transposed_conv(flat, w, o_.stride, {0, 0}, {0, 0}, o_.dilation);
      return t.reshape({R, B, t.size(1), t.size(2), t.size(3)});
    };
    if (a.lA.defined() && a.lA.is_same(a.uA)) {
      at::Tensor m = side(a.lA, {&bias_acc.lower, &bias_acc.upper});
      res.lA = m;
      res.uA = m;
      return {res};
    }
    res.lA = a.lA.defined() ? side(a.lA, {&bias_acc.lower}) : at::Tensor();
    res.uA = a.uA.defined() ? side(a.uA, {&bias_acc.upper}) : at::Tensor();
    return {res};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == 4, "Conv expects a 4-D input [batch, C, H, W], got ", x[0].dim(),
                "-D");
    return AffineOp::forward(x);
  }

 private:
  at::Tensor apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const override {
    return at::conv2d(x, w, b, o_.stride, o_.padding, o_.dilation, 1);
  }

  // A [S, B, C_out, H_out, W_out] -> [S, B, C_in, H_in, W_in]: the adjoint of the convolution;
  // output_padding recovers the input size that strided convolution rounds away.
  at::Tensor map_a(const at::Tensor& A, const at::Tensor& w) const override {
    const int64_t S = A.size(0);
    const int64_t B = A.size(1);
    const at::Tensor flat = A.reshape({S * B, A.size(2), A.size(3), A.size(4)});
    std::array<int64_t, 2> out_pad{};
    for (size_t k = 0; k < 2; ++k) {
      const auto dim = static_cast<int64_t>(k);
      const int64_t produced = (A.size(3 + dim) - 1) * o_.stride[k] - 2 * o_.padding[k] +
                               o_.dilation[k] * (w.size(2 + dim) - 1) + 1;
      out_pad[k] = input_shape(0)[2 + k] - produced;
    }
    const at::Tensor res = transposed_conv(flat, w, o_.stride, o_.padding, out_pad, o_.dilation);
    return res.reshape({S, B, res.size(1), res.size(2), res.size(3)});
  }

  // Σ over (C_out, H, W) of A · b[c]: [S, B].
  at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) const override {
    return at::matmul(A.sum({3, 4}), b);
  }

  Conv2dOptions o_;
};

// 1-D convolution (pensieve's): x [B, C, L] as [B, C, 1, L] through the 2-D one with the kernel
// [C_out, C_in, 1, k], and back.
// Conv's `group` attribute, checked against the weight [C_out, C_in / group, *kernel]: C_out
// divisible by it.
int64_t conv_groups(const LoweringContext& ctx, const at::Tensor& w) {
  const int64_t g = ctx.attrs.get_int("group", 1);
  if (g < 1 || w.size(0) % g != 0) ctx.fail("group must be positive and divide C_out");
  return g;
}

// A grouped convolution's weight [C_out, C_in / g, *kernel] as the dense one [C_out, C_in,
// *kernel] of the same map: block-diagonal, output group i reading only input group i. Bounds
// then go through the ordinary convolution (CROWN, patches, sharding) at g times its arithmetic.
at::Tensor dense_group_weight(const at::Tensor& w, int64_t g) {
  if (g == 1) return w;
  const int64_t out_per_group = w.size(0) / g;
  const int64_t in_per_group = w.size(1);
  std::vector<int64_t> shape = w.sizes().vec();
  shape[1] = in_per_group * g;
  at::Tensor dense = at::zeros(shape, w.options());
  for (int64_t i = 0; i < g; ++i) {
    dense.narrow(0, i * out_per_group, out_per_group)
        .narrow(1, i * in_per_group, in_per_group)
        .copy_(w.narrow(0, i * out_per_group, out_per_group));
  }
  return dense;
}

Value lower_conv1d(LoweringContext& ctx) {
  const at::Tensor& w_grouped = ctx.constant(1);
  const int64_t groups = conv_groups(ctx, w_grouped);
  const std::string pad_mode = ctx.attrs.get_string("auto_pad", "NOTSET");
  if (pad_mode != "NOTSET") ctx.unsupported("Conv with auto_pad=" + pad_mode);
  const auto strides = ctx.attrs.get_ints("strides", {1});
  const auto dil = ctx.attrs.get_ints("dilations", {1});
  const auto pads = ctx.attrs.get_ints("pads", {0, 0});
  if (strides.size() != 1 || dil.size() != 1 || pads.size() != 2) {
    ctx.fail("strides/dilations/pads must have 1/1/2 entries");
  }
  if (pads[0] != pads[1]) ctx.unsupported("asymmetric Conv padding");
  const Conv2dOptions o{{1, strides[0]}, {0, pads[0]}, {1, dil[0]}};
  ParamPtr bias = ctx.has_input(2) ? ctx.param(ctx.constant(2)) : nullptr;
  if (bias && bias->numel() != w_grouped.size(0)) ctx.fail("Conv bias size does not match C_out");
  if (ctx.all_constant()) {
    return Value::of_constant(at::conv1d(ctx.constant(0), w_grouped,
                                         bias ? bias->get() : at::Tensor(), strides[0], pads[0],
                                         dil[0], groups));
  }
  const at::Tensor w2 = dense_group_weight(w_grouped, groups).unsqueeze(2);
  const int x = ctx.bounded(0);
  const auto& in = ctx.builder.shape(x);  // [1, C, L]
  if (in.size() != 3) ctx.fail("a 1-D Conv expects an input [batch, C, L]");
  const int planar = ctx.emit(make_reshape({in[1], 1, in[2]}), {x}, "/as_2d").node;
  const int y = ctx.emit(make_conv2d(ctx.param(w2), bias, o), {planar}).node;
  const auto& out = ctx.builder.shape(y);  // [1, C_out, 1, L_out]
  return ctx.emit(make_reshape({out[1], out[3]}), {y}, "/as_1d");
}

Value lower_conv(LoweringContext& ctx) {
  const at::Tensor& w = ctx.constant(1);
  if (w.dim() == 3) return lower_conv1d(ctx);
  if (w.dim() != 4) ctx.unsupported("Conv with a " + std::to_string(w.dim() - 2) + "-D kernel");
  const int64_t groups = conv_groups(ctx, w);
  const std::string pad_mode = ctx.attrs.get_string("auto_pad", "NOTSET");
  if (pad_mode != "NOTSET") ctx.unsupported("Conv with auto_pad=" + pad_mode);
  Conv2dOptions o;
  const auto strides = ctx.attrs.get_ints("strides", {1, 1});
  const auto dil = ctx.attrs.get_ints("dilations", {1, 1});
  const auto pads = ctx.attrs.get_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) {
    ctx.fail("strides/dilations/pads must have 2/2/4 entries");
  }
  if (pads[0] != pads[2] || pads[1] != pads[3]) ctx.unsupported("asymmetric Conv padding");
  o.stride = {strides[0], strides[1]};
  o.dilation = {dil[0], dil[1]};
  o.padding = {pads[0], pads[1]};
  ParamPtr bias = ctx.has_input(2) ? ctx.param(ctx.constant(2)) : nullptr;
  if (bias && bias->numel() != w.size(0)) ctx.fail("Conv bias size does not match C_out");
  if (ctx.all_constant()) {
    return Value::of_constant(at::conv2d(ctx.constant(0), w, bias ? bias->get() : at::Tensor(),
                                         o.stride, o.padding, o.dilation, groups));
  }
  return ctx.emit(make_conv2d(ctx.param(dense_group_weight(w, groups)), bias, o), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_conv2d(ParamPtr weight, ParamPtr bias, Conv2dOptions options) {
  return std::make_unique<BoundConv2d>(std::move(weight), std::move(bias), options);
}

void register_conv(OpRegistry& r) { r.add("Conv", kAllOpsets, lower_conv); }

}  // namespace distcrown::ops
