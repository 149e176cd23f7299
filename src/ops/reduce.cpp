// ReduceSum and ReduceMean: of constants (folded) and of bounded tensors over non-batch axes
// (BoundReduce). The axes are an attribute up to ReduceSum-11 / ReduceMean-13 (opsets 1-12 /
// 1-17) and an input from ReduceSum-13 / ReduceMean-18 on, which also bring noop_with_empty_axes.
#include "ops/reduce.hpp"

#include <ATen/ATen.h>

#include <limits>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"

namespace distcrown::ops {
namespace {

at::Tensor reduce(const at::Tensor& x, Reduction kind, at::IntArrayRef axes, bool keepdims) {
  return kind == Reduction::kSum ? x.sum(axes, keepdims) : x.mean(axes, keepdims);
}

class BoundReduce final : public BoundNode {
 public:
  BoundReduce(Reduction kind, std::vector<int64_t> axes, bool keepdims)
      : kind_(kind), axes_(std::move(axes)), keepdims_(keepdims) {}
  std::string op_type() const override {
    return kind_ == Reduction::kSum ? "ReduceSum" : "ReduceMean";
  }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }
  double known_floor(std::span<const double> in) const override {
    // A mean of values ≥ f is ≥ f; a sum of values ≥ 0 is ≥ 0.
    if (kind_ == Reduction::kMean) return in[0];
    return in[0] >= 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(axes_.back() < x[0].dim(), op_type(), " axis ", axes_.back(), " of a rank-",
                x[0].dim(), " input");
    return reduce(x[0], kind_, axes_, keepdims_);
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    // Nonnegative coefficients: the reduction of each side (as auto_LiRPA's default IBP). Not
    // in centre/radius form, where an infinite side (exp overflowing) would give inf − inf.
    return {reduce(x[0]->lower, kind_, axes_, keepdims_),
            reduce(x[0]->upper, kind_, axes_, keepdims_)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, B, *out] -> [S, B, *in]: each input element gets the A of the output it feeds (/ the
    // number of elements averaged).
    const auto& in = input_shape(0);
    int64_t count = 1;
    for (const int64_t ax : axes_) count *= in[size_t(ax)];
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          at::Tensor t = A;
          if (!keepdims_) {
            for (const int64_t ax : axes_) t = t.unsqueeze(ax + 1);  // increasing: positions hold
          }
          std::vector<int64_t> full{A.size(0), A.size(1)};
          full.insert(full.end(), in.begin() + 1, in.end());
          t = t.expand(full);
          return kind_ == Reduction::kSum ? t.contiguous() : t / double(count);
        },
        no_bias)};
  }

 private:
  Reduction kind_;
  std::vector<int64_t> axes_;
  bool keepdims_;
};

Value lower_reduce(LoweringContext& ctx, Reduction kind, bool axes_input) {
  const std::vector<int64_t> in = sizes_of(ctx, 0);
  const auto rank = int64_t(in.size());
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (axes_input) {
    if (ctx.has_input(1)) axes = int_values(ctx, 1);
  } else {
    axes = ctx.attrs.get_ints("axes", {});
  }
  if (axes.empty()) {
    // noop_with_empty_axes (from the opsets whose axes are an input): no axes = the identity.
    if (axes_input && ctx.attrs.get_int("noop_with_empty_axes", 0) != 0) return ctx.inputs.at(0);
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);  // every axis
  }
  axes = normalised_axes(ctx, axes, rank);
  if (ctx.all_constant()) {
    return Value::of_constant(reduce(ctx.constant(0), kind, axes, keepdims));
  }
  if (!axes.empty() && axes.front() == 0) {
    // The batch dim is 1: reducing it keeps each element; without keepdims the dim goes.
    if (!keepdims) ctx.unsupported(ctx.op_type + " over the batch dimension without keepdims");
    axes.erase(axes.begin());
  }
  if (axes.empty()) return ctx.inputs.at(0);
  return ctx.emit(make_reduce(kind, std::move(axes), keepdims), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_reduce(Reduction kind, std::vector<int64_t> axes, bool keepdims) {
  return std::make_unique<BoundReduce>(kind, std::move(axes), keepdims);
}

void register_reduce(OpRegistry& r) {
  r.add("ReduceSum", {.first = 1, .last = 12},
        [](LoweringContext& c) { return lower_reduce(c, Reduction::kSum, false); });
  r.add("ReduceSum", {.first = 13},
        [](LoweringContext& c) { return lower_reduce(c, Reduction::kSum, true); });
  r.add("ReduceMean", {.first = 1, .last = 17},
        [](LoweringContext& c) { return lower_reduce(c, Reduction::kMean, false); });
  r.add("ReduceMean", {.first = 18},
        [](LoweringContext& c) { return lower_reduce(c, Reduction::kMean, true); });
}

}  // namespace distcrown::ops
