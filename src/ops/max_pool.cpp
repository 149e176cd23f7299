#include "distcrown/ops/max_pool.hpp"

#include <limits>

#include <ATen/ATen.h>

#include "distcrown/graph/op_registry.hpp"

namespace distcrown::ops {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

class BoundMaxPool final : public BoundNode {
 public:
  explicit BoundMaxPool(PoolWindow w) : w_(w) {}
  std::string op_type() const override { return "MaxPool"; }
  OpTraits traits() const override { return {.needs_input_bounds = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == 4, "MaxPool expects a 4-D input [batch, C, H, W], got ", x[0].dim(),
                "-D");
    return pool(x[0]);
  }
  // Exact per output: the maximum is non-decreasing in every input.
  Interval ibp(std::span<const Interval* const> x) const override {
    return {pool(x[0]->lower), pool(x[0]->upper)};
  }

  // A [S, B, C, Ho, Wo] -> [S, B, C, H, W]. Every window puts its coefficient on its i* only:
  // the lower side takes the lower line for A >= 0 and the upper line for A < 0 (x_i* where the
  // window is linear, else the constant into the bias); the upper side the other way round.
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    const Relaxation r = relax(*bounds[0]);
    BoundA out;
    if (a.lA.defined()) {
      const at::Tensor& A = a.lA;
      out.lA = to_input(at::where(r.linear, A, A.clamp_min(0)), r.index);
      accumulate(bias.lower, contract(A.clamp_max(0), r.upper_const));
    }
    if (a.uA.defined()) {
      const at::Tensor& A = a.uA;
      out.uA = to_input(at::where(r.linear, A, A.clamp_max(0)), r.index);
      accumulate(bias.upper, contract(A.clamp_min(0), r.upper_const));
    }
    return {out};
  }

 private:
  // The relaxation of every window for input bounds [B, C, H, W].
  struct Relaxation {
    at::Tensor index;        // [B, C, Ho, Wo] long: i*, flat in the padded plane [Hp·Wp]
    at::Tensor linear;       // [B, C, Ho, Wo] bool: l_i* >= u_j for every other j (y = x_i*)
    at::Tensor upper_const;  // [B, C, Ho, Wo]: max_j u_j where not linear, 0 where linear
  };

  at::Tensor padded(const at::Tensor& x) const {
    return w_.padded() ? at::constant_pad_nd(x, w_.torch_pads(), kMinusInf) : x;
  }
  at::Tensor pool(const at::Tensor& x) const {
    return at::max_pool2d(padded(x), w_.kernel, w_.stride);
  }

  Relaxation relax(const Interval& in) const {
    // The choice of i* and of the linear windows is discrete: no gradient (α-CROWN's bounds
    // carry one) is needed there; the constant keeps it, as in auto_LiRPA.
    const at::Tensor lo = padded(in.lower.detach());
    const at::Tensor up = padded(in.upper.detach());
    // i*: max_pool2d's index, the first largest lower bound in row-major window order (the
    // choice auto_LiRPA makes, which matters: after a ReLU many windows tie at 0).
    auto [max_lower, index] = at::max_pool2d_with_indices(lo, w_.kernel, w_.stride, {0, 0}, {1, 1});
    const int64_t B = lo.size(0);
    const int64_t C = lo.size(1);
    const int64_t Wp = lo.size(3);
    const int64_t Ho = max_lower.size(2);
    const int64_t Wo = max_lower.size(3);
    const int64_t window = w_.kernel[0] * w_.kernel[1];
    // Upper bounds of every window, [B, C, kH·kW, Ho·Wo] (im2col's order: kernel rows, then
    // columns), with i* knocked out: the largest upper bound of the other inputs per window.
    // Per window, so that overlapping windows do not knock out each other's i*.
    const at::Tensor cols =
        at::im2col(up, w_.kernel, {1, 1}, {0, 0}, w_.stride).view({B, C, window, Ho * Wo});
    const auto index_options = index.options();
    const at::Tensor top = at::arange(Ho, index_options).mul(w_.stride[0]).view({Ho, 1});
    const at::Tensor left = at::arange(Wo, index_options).mul(w_.stride[1]).view({1, Wo});
    const at::Tensor local =
        (index.div(Wp, "floor") - top) * w_.kernel[1] + (index.remainder(Wp) - left);
    const at::Tensor others =
        cols.scatter(2, local.view({B, C, 1, Ho * Wo}), kMinusInf).amax(2).view({B, C, Ho, Wo});
    Relaxation r;
    r.index = std::move(index);
    r.linear = max_lower >= others;
    r.upper_const = at::where(r.linear, at::zeros({}, in.upper.options()), pool(in.upper));
    return r;
  }

  // coef [S, B, C, Ho, Wo] at each window's i* -> [S, B, C, H, W]. Overlapping windows that share
  // an i* add up; non-overlapping ones write each element at most once (exact).
  at::Tensor to_input(const at::Tensor& coef, const at::Tensor& index) const {
    const auto& in = input_shape(0);
    const int64_t S = coef.size(0);
    const int64_t B = coef.size(1);
    const int64_t C = coef.size(2);
    const int64_t Hp = in[2] + w_.pads[0] + w_.pads[2];
    const int64_t Wp = in[3] + w_.pads[1] + w_.pads[3];
    const int64_t L = coef.size(3) * coef.size(4);
    const at::Tensor idx = index.view({1, B, C, L}).expand({S, B, C, L});
    const at::Tensor flat = at::zeros({S, B, C, Hp * Wp}, coef.options())
                                .scatter_add(3, idx, coef.reshape({S, B, C, L}));
    at::Tensor full = flat.view({S, B, C, Hp, Wp});
    if (w_.padded()) {
      full = full.slice(3, w_.pads[0], w_.pads[0] + in[2]).slice(4, w_.pads[1], w_.pads[1] + in[3]);
    }
    return full;
  }

  PoolWindow w_;
};

Value lower_max_pool(LoweringContext& ctx) {
  // storage_order only affects the optional second output (Indices); the loader refuses any use
  // of an output that a lowering does not produce.
  const PoolWindow w = read_pool_window(ctx);
  NodePtr op = make_max_pool(w);
  if (ctx.all_constant()) return Value::of_constant(op->forward({&ctx.constant(0), 1}));
  return ctx.emit(std::move(op), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_max_pool(PoolWindow window) { return std::make_unique<BoundMaxPool>(window); }

void register_max_pool(OpRegistry& r) { r.add("MaxPool", kAllOpsets, lower_max_pool); }

}  // namespace distcrown::ops
