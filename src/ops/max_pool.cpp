#include "ops/max_pool.hpp"

#include <limits>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"

namespace distcrown::ops {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

class BoundMaxPool final : public BoundNode {
 public:
  explicit BoundMaxPool(PoolWindow w) : w_(w) {}
  std::string op_type() const override { return "MaxPool"; }
  OpTraits traits() const override {
    return {.needs_input_bounds = true, .relaxation_params = true};
  }

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

  // α-CROWN (auto_LiRPA's optimised MaxPool): the lower line of a window that is not linear
  // becomes Σ_i α_i·x_i over its elements, α on the simplex (a convex combination is at most
  // the maximum); P = [kH·kW, B, C, Ho, Wo], starting one-hot at i* (CROWN's line). Windows that
  // are linear keep x_i*; the upper line stays CROWN's.
  at::Tensor initial_relaxation_params(const Interval& in) const override {
    const Relaxation r = relax(in);
    const int64_t window = w_.kernel[0] * w_.kernel[1];
    return at::one_hot(r.local, window).permute({4, 0, 1, 2, 3}).to(in.lower.scalar_type());
  }

  // Euclidean projection of every window's weights (dim 2 of alpha [2, rows, K, B, C, Ho, Wo])
  // onto the simplex over its real (unpadded) elements: sort, find the threshold λ, clamp.
  void project_relaxation_params(at::Tensor& alpha, const Interval& /*in*/) const override {
    const int64_t window = alpha.size(2);
    const at::Tensor real = real_elements(alpha.options()).unsqueeze(0).unsqueeze(0);
    const at::Tensor v =
        at::where(real, alpha, at::full({}, kMinusInf, alpha.options()));  // padding last
    const at::Tensor u = std::get<0>(v.sort(2, /*descending=*/true));
    const at::Tensor finite = at::isfinite(u);
    const at::Tensor css = at::where(finite, u, at::zeros({}, u.options())).cumsum(2);
    std::vector<int64_t> j_shape(size_t(alpha.dim()), 1);
    j_shape[2] = window;
    const at::Tensor j = at::arange(1, window + 1, alpha.options()).view(j_shape);
    const at::Tensor cond = finite & (u - (css - 1) / j > 0);
    // The largest j where the condition holds (the first element always satisfies it).
    const at::Tensor rho = (cond.to(alpha.scalar_type()) * j).amax(2, /*keepdim=*/true);
    const at::Tensor css_rho = css.gather(2, rho.to(at::kLong) - 1);
    const at::Tensor lambda = (css_rho - 1) / rho;
    alpha.copy_(at::where(real, (alpha - lambda).clamp_min(0), at::zeros({}, alpha.options())));
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    if (!p.alpha_l.defined() && !p.alpha_u.defined()) return backward(a, bounds, bias);
    const Relaxation r = relax(*bounds[0]);
    const at::Tensor zero = at::zeros({}, r.upper_const.options());
    // A [S, B, C, Ho, Wo]: linear windows put A on i*; the others spread the part that takes the
    // lower line over the window by α ([S, K, B, C, Ho, Wo]) and put the rest into the bias.
    const auto side = [&](const at::Tensor& A, const at::Tensor& alpha, bool upper) {
      const at::Tensor to_lower_line = upper ? A.clamp_max(0) : A.clamp_min(0);
      const at::Tensor spread = at::where(r.linear, zero, to_lower_line).unsqueeze(1) * alpha;
      return to_input(at::where(r.linear, A, zero), r.index) + to_windows(spread);
    };
    BoundA out;
    if (a.lA.defined()) {
      out.lA = p.alpha_l.defined()
                   ? side(a.lA, p.alpha_l, false)
                   : to_input(at::where(r.linear, a.lA, a.lA.clamp_min(0)), r.index);
      accumulate(bias.lower, contract(a.lA.clamp_max(0), r.upper_const));
    }
    if (a.uA.defined()) {
      out.uA = p.alpha_u.defined()
                   ? side(a.uA, p.alpha_u, true)
                   : to_input(at::where(r.linear, a.uA, a.uA.clamp_max(0)), r.index);
      accumulate(bias.upper, contract(a.uA.clamp_min(0), r.upper_const));
    }
    return {out};
  }

 private:
  // The relaxation of every window for input bounds [B, C, H, W].
  struct Relaxation {
    at::Tensor index;        // [B, C, Ho, Wo] long: i*, flat in the padded plane [Hp·Wp]
    at::Tensor linear;       // [B, C, Ho, Wo] bool: l_i* >= u_j for every other j (y = x_i*)
    at::Tensor upper_const;  // [B, C, Ho, Wo]: max_j u_j where not linear, 0 where linear
    at::Tensor local;        // [B, C, Ho, Wo] long: i* within its window (im2col order)
  };

  // [K, 1, 1, Ho, Wo] bool: window element k of output (ho, wo) is an input element, not padding.
  at::Tensor real_elements(const at::TensorOptions& options) const {
    const auto& in = input_shape(0);
    const at::Tensor ones = padded(at::ones({1, 1, in[2], in[3]}, options), 0.0);
    const at::Tensor cols = at::im2col(ones, w_.kernel, {1, 1}, {0, 0}, w_.stride);  // [1, K, L]
    const auto [Ho, Wo] = w_.output_size(in[2], in[3]);
    return cols.view({cols.size(1), 1, 1, Ho, Wo}) > 0;
  }

  // coef [S, K, B, C, Ho, Wo] on every window's elements -> [S, B, C, H, W], summing where
  // windows overlap (col2im, the adjoint of im2col).
  at::Tensor to_windows(const at::Tensor& coef) const {
    const auto& in = input_shape(0);
    const int64_t S = coef.size(0);
    const int64_t K = coef.size(1);
    const int64_t B = coef.size(2);
    const int64_t C = coef.size(3);
    const int64_t Hp = in[2] + w_.pads[0] + w_.pads[2];
    const int64_t Wp = in[3] + w_.pads[1] + w_.pads[3];
    const at::Tensor cols = coef.permute({0, 2, 3, 1, 4, 5}).reshape({S * B, C * K, -1});
    at::Tensor full =
        at::col2im(cols, {Hp, Wp}, w_.kernel, {1, 1}, {0, 0}, w_.stride).view({S, B, C, Hp, Wp});
    if (w_.padded()) {
      full = full.slice(3, w_.pads[0], w_.pads[0] + in[2]).slice(4, w_.pads[1], w_.pads[1] + in[3]);
    }
    return full;
  }

  at::Tensor padded(const at::Tensor& x, double value = kMinusInf) const {
    return w_.padded() ? at::constant_pad_nd(x, w_.torch_pads(), value) : x;
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
    r.local = local;
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
