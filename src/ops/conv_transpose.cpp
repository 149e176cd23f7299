#include "ops/conv_transpose.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/affine.hpp"

namespace distcrown::ops {
namespace {

// ConvTranspose is the adjoint of a convolution with the same weight, so its own adjoint (the
// CROWN step) is that convolution. Padding removes output rows and columns: the symmetric part
// is LibTorch's `padding`, the rest (pads that differ between the two sides) is cropped from
// the result, and the adjoint puts zeros back in their place.
class BoundConvTranspose2d final : public AffineOp {
 public:
  BoundConvTranspose2d(ParamPtr w, ParamPtr b, ConvTranspose2dOptions o)
      : AffineOp(std::move(w), std::move(b)), o_(o) {
    for (size_t k = 0; k < 2; ++k) {
      symmetric_[k] = std::min(o_.pad_begin[k], o_.pad_end[k]);
      crop_begin_[k] = o_.pad_begin[k] - symmetric_[k];
      crop_end_[k] = o_.pad_end[k] - symmetric_[k];
    }
  }
  std::string op_type() const override { return "ConvTranspose"; }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == 4, "ConvTranspose expects a 4-D input [batch, C, H, W], got ",
                x[0].dim(), "-D");
    return AffineOp::forward(x);
  }

 private:
  bool cropped() const { return crop_begin_[0] + crop_begin_[1] + crop_end_[0] + crop_end_[1] > 0; }

  at::Tensor apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const override {
    at::Tensor y =
        at::conv_transpose2d(x, w, b, o_.stride, symmetric_, o_.output_padding, 1, o_.dilation);
    if (!cropped()) return y;
    return y.slice(2, crop_begin_[0], y.size(2) - crop_end_[0])
        .slice(3, crop_begin_[1], y.size(3) - crop_end_[1]);
  }

  // A [S, B, C_out, H_out, W_out] -> [S, B, C_in, H, W]: the convolution with the same weight.
  // Where output_padding reaches a stride the convolution yields one more row than the input
  // has (that row met no input element), so the result is narrowed to the input's size.
  at::Tensor map_a(const at::Tensor& A, const at::Tensor& w) const override {
    const int64_t S = A.size(0);
    const int64_t B = A.size(1);
    at::Tensor flat = A.reshape({S * B, A.size(2), A.size(3), A.size(4)});
    if (cropped()) {
      flat = at::constant_pad_nd(flat, {crop_begin_[1], crop_end_[1], crop_begin_[0], crop_end_[0]},
                                 0);
    }
    const auto& in = input_shape(0);  // [1, C_in, H, W]
    const at::Tensor res = at::conv2d(flat, w, {}, o_.stride, symmetric_, o_.dilation, 1)
                               .slice(2, 0, in[2])
                               .slice(3, 0, in[3]);
    return res.reshape({S, B, res.size(1), in[2], in[3]});
  }

  // Σ over (C_out, H_out, W_out) of A · b[c]: [S, B].
  at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) const override {
    return at::matmul(A.sum({3, 4}), b);
  }

  ConvTranspose2dOptions o_;
  std::array<int64_t, 2> symmetric_{};
  std::array<int64_t, 2> crop_begin_{};
  std::array<int64_t, 2> crop_end_{};
};

std::array<int64_t, 2> pair_of(const LoweringContext& ctx, const std::vector<int64_t>& v,
                               const char* what) {
  if (v.size() != 2) ctx.fail(std::string(what) + " must have 2 entries");
  return {v[0], v[1]};
}

Value lower_conv_transpose(LoweringContext& ctx) {
  const at::Tensor& w = ctx.constant(1);
  if (w.dim() != 4) {
    ctx.unsupported("ConvTranspose with a " + std::to_string(w.dim() - 2) + "-D kernel");
  }
  if (ctx.attrs.get_int("group", 1) != 1) ctx.unsupported("ConvTranspose with group != 1");
  const std::string pad_mode = ctx.attrs.get_string("auto_pad", "NOTSET");
  if (pad_mode != "NOTSET") ctx.unsupported("ConvTranspose with auto_pad=" + pad_mode);
  if (ctx.attrs.has("output_shape")) ctx.unsupported("ConvTranspose with output_shape");
  ConvTranspose2dOptions o;
  o.stride = pair_of(ctx, ctx.attrs.get_ints("strides", {1, 1}), "strides");
  o.dilation = pair_of(ctx, ctx.attrs.get_ints("dilations", {1, 1}), "dilations");
  o.output_padding = pair_of(ctx, ctx.attrs.get_ints("output_padding", {0, 0}), "output_padding");
  const auto pads = ctx.attrs.get_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) ctx.fail("pads must have 4 entries");
  o.pad_begin = {pads[0], pads[1]};
  o.pad_end = {pads[2], pads[3]};
  for (size_t k = 0; k < 2; ++k) {
    if (o.stride[k] < 1 || o.dilation[k] < 1) ctx.fail("strides and dilations must be >= 1");
    if (o.pad_begin[k] < 0 || o.pad_end[k] < 0) ctx.fail("pads must be >= 0");
    // LibTorch's bound, which ONNX's output size formula needs for the extra rows to exist.
    if (o.output_padding[k] < 0 || o.output_padding[k] >= std::max(o.stride[k], o.dilation[k])) {
      ctx.fail("output_padding must be >= 0 and below the stride or the dilation");
    }
  }
  ParamPtr bias = ctx.has_input(2) ? ctx.param(ctx.constant(2)) : nullptr;
  if (bias && bias->numel() != w.size(1)) ctx.fail("ConvTranspose bias size does not match C_out");
  NodePtr op = make_conv_transpose2d(ctx.param(w), bias, o);
  if (ctx.all_constant()) return Value::of_constant(op->forward({&ctx.constant(0), 1}));
  return ctx.emit(std::move(op), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_conv_transpose2d(ParamPtr weight, ParamPtr bias, ConvTranspose2dOptions options) {
  return std::make_unique<BoundConvTranspose2d>(std::move(weight), std::move(bias), options);
}

void register_conv_transpose(OpRegistry& r) {
  r.add("ConvTranspose", kAllOpsets, lower_conv_transpose);
}

}  // namespace distcrown::ops
