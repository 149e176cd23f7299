#include "ops/avg_pool.hpp"

#include <numeric>
#include <optional>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/nonnegative_map.hpp"

namespace distcrown::ops {
namespace {

// AveragePool: the input is zero-padded explicitly (so asymmetric pads work) and pooled without
// padding. With count_include_pad = 0 and padding, each window's sum is divided by the number of
// input elements it covers (counts(), [1, 1, Ho, Wo]); else torch divides by kH·kW.
class BoundAveragePool final : public NonNegativeLinearMap {
 public:
  BoundAveragePool(PoolWindow w, bool count_include_pad)
      : w_(w), divide_by_count_(!count_include_pad && w.padded()) {}
  std::string op_type() const override { return "AveragePool"; }
  OpTraits traits() const override {
    return {.affine = true, .mixes_elements = true, .patches = true};
  }

  // Patches on the output, windows [R, B, C, kh, kw], become patches on the input as through a
  // depthwise convolution with a box filter: each window, scaled by 1 / its positions' divisors
  // (0 outside the output, the next layer's zero padding), goes through the transposed
  // convolution with ones [C, 1, kH, kW] (groups C), giving [R, B, C, (kh−1)·sH + kH, ...]; the
  // anchor moves to stride·s and padding·s + the top/left pads (the padded plane's zeros fall
  // outside the input node, where coefficients stand for nothing).
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& /*bias_acc*/) const override {
    const auto& out = output_shape();  // [1, C, Ho, Wo]
    const auto& in = input_shape(0);
    const at::TensorOptions options = a.any().options();
    const at::Tensor scale =  // [R, 1, 1, kh, kw]
        divide_by_count_
            ? unfold_windows(1.0 / counts(in[2], in[3], options), a)
            : window_mask(a, out[2], out[3], options) / double(w_.kernel[0] * w_.kernel[1]);
    const int64_t C = out[1];
    const at::Tensor box = at::ones({C, 1, w_.kernel[0], w_.kernel[1]}, options);
    PatchesA res = a;
    for (size_t k = 0; k < 2; ++k) {
      res.stride[k] = a.stride[k] * w_.stride[k];
      res.padding[k] = a.padding[k] * w_.stride[k] + w_.pads[k];
    }
    return {map_patch_sides(res, [&](const at::Tensor& A) {
      const int64_t R = A.size(0);
      const int64_t B = A.size(1);
      const at::Tensor flat = (A * scale).reshape({R * B, C, A.size(3), A.size(4)});
      const at::Tensor t = at::conv_transpose2d(flat, box, {}, w_.stride, {0, 0}, {0, 0}, C);
      return t.reshape({R, B, C, t.size(2), t.size(3)});
    })};
  }

 private:
  at::Tensor apply(const at::Tensor& x) const override {
    TORCH_CHECK(x.dim() == 4, "AveragePool expects a 4-D input [batch, C, H, W], got ", x.dim(),
                "-D");
    const at::Tensor xp = w_.padded() ? at::constant_pad_nd(x, w_.torch_pads(), 0) : x;
    if (!divide_by_count_) return at::avg_pool2d(xp, w_.kernel, w_.stride);
    const at::Tensor sums = at::avg_pool2d(xp, w_.kernel, w_.stride, {0, 0}, false, true, 1);
    return sums / counts(x.size(2), x.size(3), x.options());
  }

  // A [S, B, C, Ho, Wo] -> [S, B, C, H, W]: avg_pool2d's own adjoint on the padded plane (it
  // spreads A[o] / divisor over window o), then the padding cropped away.
  at::Tensor adjoint(const at::Tensor& A) const override {
    const auto& in = input_shape(0);
    const int64_t H = in[2];
    const int64_t W = in[3];
    const int64_t S = A.size(0);
    const int64_t B = A.size(1);
    const int64_t C = A.size(2);
    at::Tensor g = A.reshape({S * B, C, A.size(3), A.size(4)});
    if (divide_by_count_) g = g / counts(H, W, A.options());
    // Only its shape is read: the padded input plane [S·B, C, Hp, Wp].
    const at::Tensor plane = at::empty(
        {S * B, C, H + w_.pads[0] + w_.pads[2], W + w_.pads[1] + w_.pads[3]}, A.options());
    const std::optional<int64_t> divisor =
        divide_by_count_ ? std::optional<int64_t>(1) : std::nullopt;
    at::Tensor grad =
        at::avg_pool2d_backward(g, plane, w_.kernel, w_.stride, {0, 0}, false, true, divisor);
    if (w_.padded())
      grad = grad.slice(2, w_.pads[0], w_.pads[0] + H).slice(3, w_.pads[1], w_.pads[1] + W);
    return grad.reshape({S, B, C, H, W});
  }

  // Input (non-padding) elements per window, [1, 1, Ho, Wo], exact small integers.
  at::Tensor counts(int64_t H, int64_t W, const at::TensorOptions& options) const {
    const at::Tensor ones =
        at::constant_pad_nd(at::ones({1, 1, H, W}, options), w_.torch_pads(), 0);
    return at::avg_pool2d(ones, w_.kernel, w_.stride, {0, 0}, false, true, 1);
  }

  PoolWindow w_;
  bool divide_by_count_;
};

// GlobalAveragePool: the mean over every spatial dim, kept as size-1 dims.
class BoundGlobalAveragePool final : public NonNegativeLinearMap {
 public:
  std::string op_type() const override { return "GlobalAveragePool"; }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }

 private:
  static std::vector<int64_t> spatial_dims(int64_t rank) {
    std::vector<int64_t> dims(size_t(rank - 2));
    std::iota(dims.begin(), dims.end(), int64_t{2});
    return dims;
  }
  at::Tensor apply(const at::Tensor& x) const override {
    TORCH_CHECK(x.dim() >= 3, "GlobalAveragePool expects [batch, C, *spatial], got ", x.dim(),
                "-D");
    return x.mean(spatial_dims(x.dim()), /*keepdim=*/true);
  }
  // A [S, B, C, 1, ...] -> [S, B, C, *spatial]: A / n at every element.
  at::Tensor adjoint(const at::Tensor& A) const override {
    const auto& in = input_shape(0);
    std::vector<int64_t> full{A.size(0), A.size(1)};
    full.insert(full.end(), in.begin() + 1, in.end());
    const int64_t n = std::accumulate(in.begin() + 2, in.end(), int64_t{1}, std::multiplies<>());
    return A.expand(full) / double(n);
  }
};

Value lower_average_pool(LoweringContext& ctx) {
  const PoolWindow w = read_pool_window(ctx);
  const int64_t cip = ctx.attrs.get_int("count_include_pad", 0);
  if (cip != 0 && cip != 1) ctx.fail("count_include_pad must be 0 or 1");
  NodePtr op = make_average_pool(w, cip == 1);
  if (ctx.all_constant()) return Value::of_constant(op->forward({&ctx.constant(0), 1}));
  return ctx.emit(std::move(op), {ctx.bounded(0)});
}

Value lower_global_average_pool(LoweringContext& ctx) {
  NodePtr op = make_global_average_pool();
  if (ctx.all_constant()) return Value::of_constant(op->forward({&ctx.constant(0), 1}));
  if (ctx.builder.shape(ctx.bounded(0)).size() < 3) {
    ctx.fail("GlobalAveragePool needs an input [batch, C, *spatial]");
  }
  return ctx.emit(std::move(op), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_average_pool(PoolWindow window, bool count_include_pad) {
  return std::make_unique<BoundAveragePool>(window, count_include_pad);
}

NodePtr make_global_average_pool() { return std::make_unique<BoundGlobalAveragePool>(); }

void register_avg_pool(OpRegistry& r) {
  r.add("AveragePool", kAllOpsets, lower_average_pool);
  r.add("GlobalAveragePool", kAllOpsets, lower_global_average_pool);
}

}  // namespace distcrown::ops
