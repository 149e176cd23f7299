// Slice and Gather: of constants (the shape arithmetic of exported graphs, folded at import) and
// of bounded tensors along non-batch axes with constant positions (BoundSlice, BoundGather).
#include "ops/slice.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"

namespace distcrown::ops {
namespace {

at::Tensor apply_ranges(at::Tensor x, const std::vector<SliceRange>& ranges, int64_t shift) {
  for (const SliceRange& r : ranges) x = x.slice(r.axis + shift, r.start, r.end, r.step);
  return x;
}

class BoundSlice final : public BoundNode {
 public:
  explicit BoundSlice(std::vector<SliceRange> ranges) : ranges_(std::move(ranges)) {}
  std::string op_type() const override { return "Slice"; }
  OpTraits traits() const override { return {.affine = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    for (const SliceRange& r : ranges_) {
      TORCH_CHECK(r.axis >= 1 && r.axis < x[0].dim() && r.end <= x[0].size(r.axis),
                  "Slice range on axis ", r.axis, " does not fit the input ", x[0].sizes());
    }
    return apply_ranges(x[0], ranges_, 0);
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    return {apply_ranges(x[0]->lower, ranges_, 0), apply_ranges(x[0]->upper, ranges_, 0)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, B, *out] -> [S, B, *in]: A at the sliced positions, 0 elsewhere.
    const auto& in = input_shape(0);
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          std::vector<int64_t> full{A.size(0), A.size(1)};
          full.insert(full.end(), in.begin() + 1, in.end());
          at::Tensor out = at::zeros(full, A.options());
          apply_ranges(out, ranges_, 1).copy_(A);
          return out;
        },
        no_bias)};
  }

 private:
  std::vector<SliceRange> ranges_;
};

class BoundGather final : public BoundNode {
 public:
  BoundGather(int64_t axis, std::vector<int64_t> indices, std::vector<int64_t> index_shape)
      : axis_(axis), indices_(std::move(indices)), index_shape_(std::move(index_shape)) {
    unique_ = std::set<int64_t>(indices_.begin(), indices_.end()).size() == indices_.size();
  }
  std::string op_type() const override { return "Gather"; }
  OpTraits traits() const override { return {.affine = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return gather(x[0]); }
  Interval ibp(std::span<const Interval* const> x) const override {
    return {gather(x[0]->lower), gather(x[0]->upper)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, B, *pre, *index_shape, *post] -> [S, B, *pre, n, *post], then into zeros of
    // [S, B, *in] at the gathered positions along the axis (summed where an index repeats).
    const auto& in = input_shape(0);
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          std::vector<int64_t> full{A.size(0), A.size(1)};
          full.insert(full.end(), in.begin() + 1, in.end());
          std::vector<int64_t> flat = full;
          flat[size_t(axis_ + 1)] = int64_t(indices_.size());
          const at::Tensor idx = index_tensor(A.device());
          const at::Tensor zeros = at::zeros(full, A.options());
          // Unique indices: a copy (no summation, the same bits on every device).
          return unique_ ? zeros.index_copy(axis_ + 1, idx, A.reshape(flat))
                         : zeros.index_add(axis_ + 1, idx, A.reshape(flat));
        },
        no_bias)};
  }

 private:
  at::Tensor index_tensor(const at::Device& device) const {
    return at::tensor(indices_, at::TensorOptions().dtype(at::kLong)).to(device);
  }
  at::Tensor gather(const at::Tensor& x) const {
    TORCH_CHECK(axis_ < x.dim(), "Gather axis ", axis_, " of a rank-", x.dim(), " input");
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + axis_);
    shape.insert(shape.end(), index_shape_.begin(), index_shape_.end());
    shape.insert(shape.end(), x.sizes().begin() + axis_ + 1, x.sizes().end());
    return x.index_select(axis_, index_tensor(x.device())).reshape(shape);
  }

  int64_t axis_;
  std::vector<int64_t> indices_;
  std::vector<int64_t> index_shape_;
  bool unique_ = true;
};

// ONNX Slice on one axis of size n, positive step: negative starts/ends count from the end, then
// both are clamped to [0, n].
SliceRange clamped_range(int64_t axis, int64_t n, int64_t start, int64_t end, int64_t step) {
  const auto clampi = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
  const int64_t s = clampi(start);
  return {axis, s, std::max(s, clampi(end)), step};
}

// Slice with starts, ends, axes (empty: 0, 1, ...) and steps (empty: 1) read from attributes
// (opsets 1-9) or inputs (10+).
Value lower_slice_with(LoweringContext& ctx, const std::vector<int64_t>& starts,
                       const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                       std::vector<int64_t> steps) {
  const std::vector<int64_t> in = sizes_of(ctx, 0);
  const auto rank = int64_t(in.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    ctx.fail("starts, ends, axes and steps must have the same length");
  }
  std::vector<SliceRange> ranges;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] == 0) ctx.fail("a step of 0");
    if (steps[i] < 0) ctx.unsupported("Slice with a negative step");
    const int64_t axis = normalised_axis(ctx, axes[i], rank);
    ranges.push_back(clamped_range(axis, in[size_t(axis)], starts[i], ends[i], steps[i]));
  }
  std::vector<int64_t> sliced_axes(ranges.size());
  std::transform(ranges.begin(), ranges.end(), sliced_axes.begin(),
                 [](const SliceRange& r) { return r.axis; });
  (void)normalised_axes(ctx, sliced_axes, rank);  // refuses repeated axes
  if (ctx.all_constant()) {
    return Value::of_constant(apply_ranges(ctx.constant(0), ranges, 0).contiguous());
  }
  // A bounded tensor: dim 0 is the batch. A range there must keep the (single) element.
  std::vector<SliceRange> kept;
  for (const SliceRange& r : ranges) {
    if (r.axis != 0) {
      if (r.end <= r.start) ctx.unsupported("Slice with an empty result");
      kept.push_back(r);
    } else if (r.start != 0 || r.end < 1) {
      ctx.unsupported("Slice of the batch dimension");
    }
  }
  if (kept.empty()) return ctx.inputs[0];
  return ctx.emit(make_slice(std::move(kept)), {ctx.bounded(0)});
}

Value lower_slice_attributes(LoweringContext& ctx) {  // opsets 1-9
  if (!ctx.attrs.int_lists.count("starts") || !ctx.attrs.int_lists.count("ends")) {
    ctx.fail("needs the attributes starts and ends");
  }
  return lower_slice_with(ctx, ctx.attrs.get_ints("starts", {}), ctx.attrs.get_ints("ends", {}),
                          ctx.attrs.get_ints("axes", {}), {});
}

Value lower_slice_inputs(LoweringContext& ctx) {  // opsets 10+
  const std::vector<int64_t> none;
  return lower_slice_with(ctx, int_values(ctx, 1), int_values(ctx, 2),
                          ctx.has_input(3) ? int_values(ctx, 3) : none,
                          ctx.has_input(4) ? int_values(ctx, 4) : none);
}

Value lower_gather(LoweringContext& ctx) {
  if (ctx.has_input(1) && ctx.inputs[1].is_bounded()) {
    ctx.unsupported("Gather with indices that depend on the perturbed input");
  }
  const std::vector<int64_t> in = sizes_of(ctx, 0);
  if (in.empty()) ctx.fail("Gather of a scalar");
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), int64_t(in.size()));
  const at::Tensor& idx_tensor = ctx.constant(1);
  std::vector<int64_t> idx = int_values(ctx, 1);
  const int64_t n = in[size_t(axis)];
  for (int64_t& i : idx) {
    if (i < -n || i >= n) ctx.fail("index " + std::to_string(i) + " out of range");
    if (i < 0) i += n;  // ONNX allows negative indices
  }
  const std::vector<int64_t> index_shape(idx_tensor.sizes().begin(), idx_tensor.sizes().end());
  if (ctx.all_constant()) {
    const at::Tensor& data = ctx.constant(0);
    // Output shape: data.shape[:axis] + indices.shape + data.shape[axis+1:].
    std::vector<int64_t> shape(data.sizes().begin(), data.sizes().begin() + axis);
    shape.insert(shape.end(), index_shape.begin(), index_shape.end());
    shape.insert(shape.end(), data.sizes().begin() + axis + 1, data.sizes().end());
    return Value::of_constant(data.index_select(axis, at::tensor(idx, at::kLong)).reshape(shape));
  }
  if (axis == 0) ctx.unsupported("Gather along the batch dimension");
  if (idx.empty()) ctx.unsupported("Gather with an empty result");
  return ctx.emit(make_gather(axis, std::move(idx), index_shape), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_slice(std::vector<SliceRange> ranges) {
  return std::make_unique<BoundSlice>(std::move(ranges));
}
NodePtr make_gather(int64_t axis, std::vector<int64_t> indices, std::vector<int64_t> index_shape) {
  return std::make_unique<BoundGather>(axis, std::move(indices), std::move(index_shape));
}

void register_slice(OpRegistry& r) {
  r.add("Slice", {.first = 1, .last = 9}, lower_slice_attributes);
  r.add("Slice", {.first = 10}, lower_slice_inputs);
  r.add("Gather", kAllOpsets, lower_gather);
}

}  // namespace distcrown::ops
