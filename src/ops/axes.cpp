#include "ops/axes.hpp"

#include <algorithm>

#include <ATen/ATen.h>

namespace distcrown::ops {

int64_t normalised_axis(const LoweringContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    ctx.fail("axis " + std::to_string(axis) + " is outside a rank-" + std::to_string(rank) +
             " tensor");
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalised_axes(const LoweringContext& ctx, std::vector<int64_t> axes,
                                     int64_t rank) {
  for (int64_t& a : axes) a = normalised_axis(ctx, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("an axis is repeated");
  return axes;
}

std::vector<int64_t> int_values(const LoweringContext& ctx, size_t i) {
  const at::Tensor& given = ctx.constant(i);
  if (!at::isIntegralType(given.scalar_type(), /*includeBool=*/false)) {
    ctx.fail("input " + std::to_string(i) + " must hold integers");
  }
  const at::Tensor t = given.to(at::kLong).contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

std::vector<int64_t> sizes_of(const LoweringContext& ctx, size_t i) {
  if (!ctx.has_input(i)) ctx.fail("missing input " + std::to_string(i));
  const Value& v = ctx.inputs[i];
  if (v.is_constant()) return {v.constant.sizes().begin(), v.constant.sizes().end()};
  const std::vector<int64_t>& s = ctx.builder.shape(v.node);
  if (v.unbatched) return {s.begin() + 1, s.end()};
  return s;
}

void check_buildable_shape(const LoweringContext& ctx, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0) ctx.fail("negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxBuiltElements / d)
      ctx.unsupported("a tensor of more than 2^24 elements built from shape values");
    n *= d;
  }
}

std::vector<int64_t> checked_broadcast(const LoweringContext& ctx,
                                       const std::vector<std::vector<int64_t>>& shapes,
                                       int64_t held) {
  // Shapes aligned at the right; each dim equal or 1.
  std::vector<int64_t> shape;
  for (const std::vector<int64_t>& dims : shapes) {
    const size_t rank = std::max(shape.size(), dims.size());
    std::vector<int64_t> next(rank);
    for (size_t i = 0; i < rank; ++i) {
      const size_t from_right = rank - 1 - i;
      const int64_t a = from_right < shape.size() ? shape[shape.size() - 1 - from_right] : 1;
      const int64_t b = from_right < dims.size() ? dims[dims.size() - 1 - from_right] : 1;
      if (a < 0 || b < 0) ctx.fail("negative dimension");
      if (a != b && a != 1 && b != 1) ctx.fail("shapes that do not broadcast");
      next[i] = a == 1 ? b : a;
    }
    shape = std::move(next);
  }
  const int64_t limit = std::max(kMaxBuiltElements, held);
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d != 0 && n > limit / d) {
      ctx.unsupported("a tensor of more than 2^24 elements built from shape values");
    }
    n *= d;
  }
  return shape;
}

std::vector<int64_t> checked_broadcast(const LoweringContext& ctx,
                                       const std::vector<at::Tensor>& constants) {
  std::vector<std::vector<int64_t>> shapes;
  int64_t held = 0;
  for (const at::Tensor& t : constants) {
    shapes.push_back(t.sizes().vec());
    held = std::max(held, t.numel());
  }
  return checked_broadcast(ctx, shapes, held);
}

std::vector<int64_t> with_batch(int64_t batch, const std::vector<int64_t>& rest) {
  std::vector<int64_t> s{batch};
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

}  // namespace distcrown::ops
