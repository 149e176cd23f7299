#include "ops/resize.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/nonnegative_map.hpp"

namespace distcrown::ops {
namespace {

// The source coordinate of output index i, as ONNX's reference computes it (`out_real` is
// scale·in, which differs from the integer output length when the scale does not divide).
double source_coordinate(double i, int64_t in_len, double out_real, double out_len, double scale,
                         const std::string& mode) {
  if (mode == "asymmetric") return i / scale;
  if (mode == "half_pixel") return (i + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out_real == 1 ? -0.5 : (i + 0.5) / scale - 0.5;
  if (mode == "align_corners") {
    return out_real == 1 ? 0.0 : i * double(in_len - 1) / (out_real - 1);
  }
  if (mode == "half_pixel_symmetric") {
    const double offset = double(in_len) / 2 * (1 - out_len / out_real);
    return offset + (i + 0.5) / scale - 0.5;
  }
  throw InvalidArgument("Resize coordinate_transformation_mode '" + mode + "' is not supported");
}

// The nearest input index to x (ratio = x − floor(x) in (0, 1], 1 at an integer).
int64_t nearest_index(double x, const std::string& mode) {
  const double f = std::floor(x);
  if (x == f) return int64_t(f);
  const double ratio = x - f;
  bool upper = false;
  if (mode == "round_prefer_floor") {
    upper = ratio > 0.5;
  } else if (mode == "round_prefer_ceil") {
    upper = ratio >= 0.5;
  } else if (mode == "ceil") {
    upper = true;
  } else if (mode != "floor") {
    throw InvalidArgument("Resize nearest_mode '" + mode + "' is not supported");
  }
  return int64_t(f) + (upper ? 1 : 0);
}

// y = x ×_d M_d over the resized axes.
class BoundResize final : public NonNegativeLinearMap {
 public:
  explicit BoundResize(std::vector<ResizeAxis> axes) : axes_(std::move(axes)) {}
  std::string op_type() const override { return "Resize"; }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }

 private:
  // x [batch, *in] -> [batch, *out].
  at::Tensor apply(const at::Tensor& x) const override {
    at::Tensor y = x;
    for (const ResizeAxis& r : axes_) {
      TORCH_CHECK(r.axis < y.dim(), "Resize of dim ", r.axis, " of a ", y.dim(), "-D input");
      const at::Tensor m = r.matrix.to(y.options());
      y = at::matmul(y.movedim(r.axis, -1), m.t()).movedim(-1, r.axis);
    }
    return y;
  }
  // A [S, batch, *out] -> [S, batch, *in]: each axis through Mᵀ.
  at::Tensor adjoint(const at::Tensor& A) const override {
    at::Tensor g = A;
    for (const ResizeAxis& r : axes_) {
      const at::Tensor m = r.matrix.to(g.options());
      g = at::matmul(g.movedim(r.axis + 1, -1), m).movedim(-1, r.axis + 1);
    }
    return g;
  }

  std::vector<ResizeAxis> axes_;
};

std::vector<double> float_values(const LoweringContext& ctx, size_t i) {
  const at::Tensor t = ctx.constant(i).to(at::kDouble).contiguous().reshape({-1});
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// The per-axis scales and output sizes of x's dims, from `scales` or `sizes`, over `axes` (all
// dims when empty).
struct Geometry {
  std::vector<double> scales;
  std::vector<int64_t> sizes;
};

Geometry read_geometry(const LoweringContext& ctx, const std::vector<int64_t>& in_shape,
                       const std::vector<double>& scales_given,
                       const std::vector<int64_t>& sizes_given,
                       const std::vector<int64_t>& axes_attr) {
  const auto rank = int64_t(in_shape.size());
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    for (int64_t& a : axes) a = normalised_axis(ctx, a, rank);
  }
  Geometry g{std::vector<double>(size_t(rank), 1.0), in_shape};
  if (!scales_given.empty() == !sizes_given.empty()) {
    ctx.fail("exactly one of scales and sizes must be given");
  }
  const size_t given = scales_given.empty() ? sizes_given.size() : scales_given.size();
  if (given != axes.size()) {
    ctx.fail("scales/sizes have " + std::to_string(given) + " entries for " +
             std::to_string(axes.size()) + " axes");
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto d = size_t(axes[k]);
    if (!scales_given.empty()) {
      if (!(scales_given[k] > 0)) ctx.fail("scales must be positive");
      g.scales[d] = scales_given[k];
      g.sizes[d] = int64_t(std::floor(double(in_shape[d]) * scales_given[k]));
    } else {
      if (sizes_given[k] < 1) ctx.fail("sizes must be positive");
      g.sizes[d] = sizes_given[k];
      g.scales[d] = double(sizes_given[k]) / double(in_shape[d]);
    }
    if (g.sizes[d] < 1) ctx.fail("an output dimension would be empty");
  }
  return g;
}

// The resized axes of a bounded x, or of a constant one folded at load.
Value emit_resize(LoweringContext& ctx, const std::vector<int64_t>& in_shape, const Geometry& g,
                  const ResizeAxisRule& rule) {
  if (g.sizes[0] != in_shape[0]) ctx.unsupported("Resize of the batch dimension");
  std::vector<ResizeAxis> axes;
  for (size_t d = 1; d < in_shape.size(); ++d) {
    if (g.sizes[d] == in_shape[d] && g.scales[d] == 1.0) continue;
    check_buildable_shape(ctx, {g.sizes[d], in_shape[d]});
    axes.push_back({int64_t(d), resize_matrix(in_shape[d], g.sizes[d], g.scales[d], rule)});
  }
  NodePtr op = make_resize(std::move(axes));
  if (ctx.all_constant()) {
    return Value::of_constant(op->forward({&ctx.constant(0), 1}));
  }
  return ctx.emit(std::move(op), {ctx.bounded(0)});
}

ResizeAxisRule read_mode(const LoweringContext& ctx) {
  ResizeAxisRule rule;
  rule.mode = ctx.attrs.get_string("mode", "nearest");
  if (rule.mode != "nearest" && rule.mode != "linear") {
    ctx.unsupported("Resize mode '" + rule.mode + "' (nearest and linear are supported)");
  }
  return rule;
}

// Upsample 9 and Resize 10 (inputs X, scales): the
// asymmetric transformation; nearest takes the floor, as the reference's np.repeat does. A
// non-integer nearest scale is refused: the reference does not define it either.
Value lower_upsample(LoweringContext& ctx) {
  ResizeAxisRule rule = read_mode(ctx);
  rule.coordinate_transformation = "asymmetric";
  rule.nearest_mode = "floor";
  // Opsets 7–8 give the scales as a float-list attribute, which the loader does not read.
  if (!ctx.has_input(1)) ctx.unsupported("Upsample with its scales as an attribute (opset 7-8)");
  const std::vector<double> scales = float_values(ctx, 1);
  if (scales.empty()) ctx.fail("Upsample needs scales");
  if (rule.mode == "nearest") {
    for (const double s : scales) {
      if (s != std::floor(s)) ctx.unsupported("nearest Upsample with a non-integer scale");
    }
  }
  const std::vector<int64_t> in_shape = sizes_of(ctx, 0);
  if (scales.size() != in_shape.size()) ctx.fail("scales must have one entry per input dim");
  return emit_resize(ctx, in_shape, read_geometry(ctx, in_shape, scales, {}, {}), rule);
}

// Resize from opset 11: inputs X, roi, scales, sizes (either may be absent or empty).
Value lower_resize(LoweringContext& ctx) {
  ResizeAxisRule rule = read_mode(ctx);
  rule.coordinate_transformation =
      ctx.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  rule.nearest_mode = ctx.attrs.get_string("nearest_mode", "round_prefer_floor");
  if (rule.coordinate_transformation == "tf_crop_and_resize") {
    ctx.unsupported("Resize with coordinate_transformation_mode tf_crop_and_resize");
  }
  if (ctx.attrs.get_int("antialias", 0) != 0) ctx.unsupported("Resize with antialias");
  const std::string policy = ctx.attrs.get_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") ctx.unsupported("Resize with keep_aspect_ratio_policy " + policy);
  const std::vector<double> scales =
      ctx.has_input(2) ? float_values(ctx, 2) : std::vector<double>{};
  const std::vector<int64_t> sizes = ctx.has_input(3) ? int_values(ctx, 3) : std::vector<int64_t>{};
  const std::vector<int64_t> in_shape = sizes_of(ctx, 0);
  try {
    return emit_resize(ctx, in_shape,
                       read_geometry(ctx, in_shape, scales, sizes, ctx.attrs.get_ints("axes", {})),
                       rule);
  } catch (const InvalidArgument& e) {
    ctx.unsupported(e.what());
  }
}

}  // namespace

at::Tensor resize_matrix(int64_t in_len, int64_t out_len, double scale,
                         const ResizeAxisRule& rule) {
  at::Tensor m = at::zeros({out_len, in_len}, at::kDouble);
  auto acc = m.accessor<double, 2>();
  const double out_real = scale * double(in_len);
  const auto clamp = [&](int64_t k) { return std::clamp<int64_t>(k, 0, in_len - 1); };
  for (int64_t i = 0; i < out_len; ++i) {
    const double x = source_coordinate(double(i), in_len, out_real, double(out_len), scale,
                                       rule.coordinate_transformation);
    if (rule.mode == "nearest") {
      acc[i][clamp(nearest_index(x, rule.nearest_mode))] = 1.0;
    } else if (rule.mode == "linear") {
      // The reference's neighbours floor(x) and floor(x) + 1, ratio in (0, 1] (1 at an integer,
      // where the weight falls on x itself).
      const double f = std::floor(x);
      const double ratio = x == f ? 1.0 : x - f;
      const int64_t lo = x == f ? int64_t(f) - 1 : int64_t(f);
      acc[i][clamp(lo)] += 1.0 - ratio;
      acc[i][clamp(lo + 1)] += ratio;
    } else {
      throw InvalidArgument("Resize mode '" + rule.mode + "' is not supported");
    }
  }
  return m;
}

NodePtr make_resize(std::vector<ResizeAxis> axes) {
  return std::make_unique<BoundResize>(std::move(axes));
}

void register_resize(OpRegistry& r) {
  r.add("Upsample", {.first = 7, .last = 9}, lower_upsample);
  r.add("Resize", {.first = 10, .last = 10}, lower_upsample);
  r.add("Resize", {.first = 11}, lower_resize);
}

}  // namespace distcrown::ops
