// Operators between values and element indices: ArgMax / ArgMin (a value's index: folded on
// constants; of a bounded tensor refused, since an index is not a quantity bounds hold on), and
// ScatterND (folded on constants; on bounded data with constant indices and updates a masked
// copy, y = data ⊙ keep + placed, linear in data).
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/add_sub.hpp"
#include "ops/axes.hpp"
#include "ops/mul_div.hpp"

namespace distcrown::ops {
namespace {

// ArgMax / ArgMin (opsets 1 on; select_last_index from 12): the first (or last) index of the
// extreme along `axis`, int64, the axis kept as 1 unless keepdims = 0.
Value lower_arg_extreme(LoweringContext& ctx, bool is_max) {
  if (ctx.inputs.size() != 1 || ctx.inputs[0].is_absent()) ctx.fail("expects 1 input");
  if (ctx.inputs[0].is_bounded()) {
    ctx.unsupported(ctx.op_type +
                    " of a variable tensor (its output is an index, which bounds do not hold "
                    "on; a property over the values themselves can be verified)");
  }
  const at::Tensor& x = ctx.constant(0);
  if (x.dim() == 0) ctx.fail("input is a scalar");
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), x.dim());
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  const bool last = ctx.attrs.get_int("select_last_index", 0) != 0;
  // at::argmax/argmin return the first extreme; the last one is the first of the flipped input.
  const at::Tensor in = last ? x.flip(axis) : x;
  at::Tensor idx = is_max ? at::argmax(in, axis, keepdims) : at::argmin(in, axis, keepdims);
  if (last) idx = x.size(axis) - 1 - idx;
  return Value::of_constant(idx.to(at::kLong));
}

// ONNX ScatterND on constants: out = data, then out[indices[i]] = updates[i] (or += for
// reduction "add"); indices [..., k] address data's first k dims, negative ones from the end.
at::Tensor scatter_nd(const LoweringContext& ctx, const at::Tensor& data, const at::Tensor& indices,
                      const at::Tensor& updates, bool add) {
  if (indices.dim() < 1) ctx.fail("indices must have at least one dim");
  const int64_t k = indices.size(-1);
  if (k < 1 || k > data.dim()) ctx.fail("the indices' last dim must be in [1, data rank]");
  std::vector<int64_t> expected(indices.sizes().begin(), indices.sizes().end() - 1);
  expected.insert(expected.end(), data.sizes().begin() + k, data.sizes().end());
  if (updates.sizes().vec() != expected) ctx.fail("updates' shape does not fit data and indices");
  at::Tensor idx = indices.to(at::kLong).reshape({-1, k});
  const at::Tensor dims =
      at::tensor(std::vector<int64_t>(data.sizes().begin(), data.sizes().begin() + k), at::kLong);
  if ((idx < -dims).any().item<bool>() || (idx >= dims).any().item<bool>()) {
    ctx.fail("an index is out of range");
  }
  idx = at::where(idx < 0, idx + dims, idx);
  c10::List<std::optional<at::Tensor>> where;
  for (int64_t j = 0; j < k; ++j) where.push_back(idx.select(1, j));
  std::vector<int64_t> rows{idx.size(0)};
  rows.insert(rows.end(), data.sizes().begin() + k, data.sizes().end());
  return data.clone().index_put_(where, updates.to(data.scalar_type()).reshape(rows), add);
}

Value lower_scatter_nd(LoweringContext& ctx) {  // opsets 11 on; reduction from 16
  if (ctx.inputs.size() != 3) ctx.fail("expects 3 inputs");
  const std::string reduction = ctx.attrs.get_string("reduction", "none");
  if (reduction != "none" && reduction != "add") ctx.unsupported("reduction '" + reduction + "'");
  const bool add = reduction == "add";
  if (ctx.inputs[1].is_bounded()) ctx.unsupported("indices that depend on the perturbed input");
  if (ctx.inputs[2].is_bounded()) ctx.unsupported("updates that depend on the perturbed input");
  const at::Tensor& indices = ctx.constant(1);
  const at::Tensor& updates = ctx.constant(2);
  if (ctx.all_constant()) {
    return Value::of_constant(scatter_nd(ctx, ctx.constant(0), indices, updates, add));
  }
  // Bounded data [batch, *ONNX shape] (dim 0 the batch, 1 at load, so indices address it too):
  // keep is 0 where an element is replaced, placed what is written there (added, for "add").
  const int x = ctx.bounded(0);
  const at::Tensor shape_like = at::zeros(ctx.builder.shape(x), ctx.param_dtype);
  const at::Tensor placed = scatter_nd(ctx, shape_like, indices, updates, add);
  int kept = x;
  if (!add) {
    const at::Tensor keep =
        scatter_nd(ctx, at::ones_like(shape_like), indices, at::zeros_like(updates), false);
    kept = ctx.emit(make_mul_const(ctx.param(keep)), {x}, "/keep").node;
  }
  return ctx.emit(make_add_const(ctx.param(placed)), {kept});
}

}  // namespace

void register_indices(OpRegistry& r) {
  r.add("ArgMax", kAllOpsets, [](LoweringContext& c) { return lower_arg_extreme(c, true); });
  r.add("ArgMin", kAllOpsets, [](LoweringContext& c) { return lower_arg_extreme(c, false); });
  r.add("ScatterND", {.first = 11}, lower_scatter_nd);
}

}  // namespace distcrown::ops
