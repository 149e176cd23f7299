#include "distcrown/ops/conv.hpp"

#include <ATen/ATen.h>

#include "distcrown/ops/register.hpp"

namespace distcrown::ops {
namespace {

class BoundConv2d final : public BoundNode {
 public:
  BoundConv2d(ParamPtr w, ParamPtr b, Conv2dOptions o)
      : w_(std::move(w)), b_(std::move(b)), o_(o) {}
  std::string op_type() const override { return "Conv"; }
  bool is_affine() const override { return true; }
  bool mixes_elements() const override { return true; }
  std::vector<ParamPtr*> params() override {
    std::vector<ParamPtr*> p{&w_};
    if (b_) p.push_back(&b_);
    return p;
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == 4, "Conv expects a 4-D input [batch, C, H, W], got ", x[0].dim(),
                "-D");
    return conv(x[0], w_->get(), bias());
  }

  Interval ibp(std::span<const Interval* const> x) const override {
    const at::Tensor w = w_->get();
    const at::Tensor mid = (x[0]->upper + x[0]->lower) / 2;
    const at::Tensor rad = (x[0]->upper - x[0]->lower) / 2;
    const at::Tensor center = conv(mid, w, bias());
    const at::Tensor dev = conv(rad, w.abs(), {});
    return {center - dev, center + dev};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias_acc) const override {
    const at::Tensor w = w_->get();
    const at::Tensor b = bias();
    return {map_sides(
        a, bias_acc, [&](const at::Tensor& A) { return transpose_conv(A, w); },
        [&](const at::Tensor& A) { return b.defined() ? bias_term(A, b) : at::Tensor(); })};
  }

 private:
  at::Tensor bias() const { return b_ ? b_->get() : at::Tensor(); }

  at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
    return at::conv2d(x, w, b, o_.stride, o_.padding, o_.dilation, 1);
  }

  // A [S, B, C_out, H_out, W_out] -> [S, B, C_in, H_in, W_in]: the adjoint of the convolution;
  // output_padding recovers the input size that strided convolution rounds away.
  at::Tensor transpose_conv(const at::Tensor& A, const at::Tensor& w) const {
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
    const at::Tensor res =
        at::conv_transpose2d(flat, w, {}, o_.stride, o_.padding, out_pad, 1, o_.dilation);
    return res.reshape({S, B, res.size(1), res.size(2), res.size(3)});
  }

  // Σ over (C_out, H, W) of A · b[c]: [S, B].
  static at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) {
    return at::matmul(A.sum({3, 4}), b);
  }

  ParamPtr w_;
  ParamPtr b_;
  Conv2dOptions o_;
};

Value lower_conv(LoweringContext& ctx) {
  const at::Tensor& w = ctx.constant(1);
  if (w.dim() != 4) ctx.unsupported("Conv with a " + std::to_string(w.dim() - 2) + "-D kernel");
  if (ctx.attrs.get_int("group", 1) != 1) ctx.unsupported("Conv with group != 1");
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
  ParamPtr bias = ctx.has_input(2) ? make_param(ctx.constant(2).to(at::kFloat)) : nullptr;
  if (bias && bias->numel() != w.size(0)) ctx.fail("Conv bias size does not match C_out");
  if (ctx.all_constant()) {
    return Value::of_constant(at::conv2d(ctx.constant(0), w, bias ? bias->get() : at::Tensor(),
                                         o.stride, o.padding, o.dilation, 1));
  }
  return ctx.emit(make_conv2d(make_param(w.to(at::kFloat)), bias, o), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_conv2d(ParamPtr weight, ParamPtr bias, Conv2dOptions options) {
  return std::make_unique<BoundConv2d>(std::move(weight), std::move(bias), options);
}

void register_conv(OpRegistry& r) { r.add("Conv", lower_conv); }

}  // namespace distcrown::ops
