// The upsampling operators of generator networks (ops/conv_transpose, ops/resize) beyond the op
// harness:
//   ConvTranspose  forward equals LibTorch's conv_transpose2d cropped by ONNX's pads (symmetric,
//                  asymmetric, output_padding, dilation), the output size ONNX's formula; the
//                  backward step is exactly the adjoint
//   Resize         the interpolation matrices of ONNX's reference rules, by hand on small
//                  cases; forward equals LibTorch's upsample functions where they define the
//                  same map (nearest floor, nearest-exact, bilinear with and without aligned
//                  corners), Upsample 9 and Resize 13 through import; the step is the adjoint
//   ONNX           one-line refusals of the variants not implemented
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/graph/param.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"
#include "linear_op_checks.hpp"
#include "onnx_builder.hpp"
#include "ops/conv_transpose.hpp"
#include "ops/resize.hpp"
#include "random_net.hpp"

namespace distcrown {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::expect_affine_step;
using testing::expect_refused;
using testing::OnnxBuilder;
using testing::Rng;
using testing::single_op;

struct TransposeCase {
  std::string name;
  ops::ConvTranspose2dOptions o;
};

std::vector<TransposeCase> transpose_cases() {
  return {{"stride 1", {}},
          {"stride 2, pads 1", {{2, 2}, {1, 1}, {1, 1}, {0, 0}, {1, 1}}},
          {"stride 2, output_padding 1", {{2, 2}, {0, 0}, {0, 0}, {1, 1}, {1, 1}}},
          {"asymmetric pads", {{2, 1}, {0, 2}, {1, 0}, {1, 0}, {1, 1}}},
          {"dilation 2, output_padding 1 at stride 1", {{1, 1}, {1, 0}, {0, 1}, {1, 0}, {2, 2}}}};
}

TEST(ConvTranspose, ForwardIsLibTorchsCroppedByPadsAndBackwardIsTheAdjoint) {
  c10::NoGradGuard no_grad;
  Rng rng(31);
  const int64_t H = 4;
  const int64_t W = 3;
  for (const TransposeCase& c : transpose_cases()) {
    const at::Tensor w = rng.normal({2, 3, 3, 2}, 0.5).to(at::kDouble);  // [C_in, C_out, kH, kW]
    const at::Tensor b = rng.normal({3}, 0.3).to(at::kDouble);
    const BoundGraph g =
        single_op({1, 2, H, W}, ops::make_conv_transpose2d(make_param(w), make_param(b), c.o));
    const at::Tensor x = rng.normal({5, 2, H, W}).to(at::kDouble);
    const at::Tensor full =
        at::conv_transpose2d(x, w, b, c.o.stride, {0, 0}, c.o.output_padding, 1, c.o.dilation);
    const at::Tensor want = full.slice(2, c.o.pad_begin[0], full.size(2) - c.o.pad_end[0])
                                .slice(3, c.o.pad_begin[1], full.size(3) - c.o.pad_end[1]);
    const at::Tensor y = g.forward(x);
    ASSERT_EQ(y.sizes(), want.sizes()) << c.name;
    for (size_t k = 0; k < 2; ++k) {
      const int64_t in = k == 0 ? H : W;
      const int64_t kernel = w.size(2 + int64_t(k));
      EXPECT_EQ(y.size(2 + int64_t(k)), (in - 1) * c.o.stride[k] - c.o.pad_begin[k] -
                                            c.o.pad_end[k] + c.o.dilation[k] * (kernel - 1) +
                                            c.o.output_padding[k] + 1)
          << c.name;
    }
    EXPECT_TRUE(at::allclose(y, want, 1e-12, 1e-12)) << c.name;
    expect_affine_step(g, rng, c.name);
  }
}

BoundGraph load_built(const OnnxBuilder& b) {
  BoundGraph g = io::load_onnx_bytes(b.bytes(), "upsample.onnx");
  g.to_dtype(at::kDouble);
  return g;
}

TEST(ConvTranspose, LoadsFromOnnxWithItsAttributes) {
  c10::NoGradGuard no_grad;
  Rng rng(32);
  const at::Tensor w = rng.normal({2, 3, 4, 4}, 0.5);
  const at::Tensor bias = rng.normal({3}, 0.3);
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y");
  b.initializer("w", w).initializer("b", bias);
  b.node("up", "ConvTranspose", {"x", "w", "b"}, {"y"},
         {attr_ints("strides", {2, 2}), attr_ints("pads", {1, 0, 1, 2}),
          attr_ints("output_padding", {1, 0}), attr_ints("kernel_shape", {4, 4})});
  const BoundGraph g = load_built(b);
  const at::Tensor x = rng.normal({4, 2, 3, 3}).to(at::kDouble);
  const at::Tensor full =
      at::conv_transpose2d(x, w.to(at::kDouble), bias.to(at::kDouble), {2, 2}, {0, 0}, {1, 0});
  const at::Tensor want = full.slice(2, 1, full.size(2) - 1).slice(3, 0, full.size(3) - 2);
  EXPECT_TRUE(at::allclose(g.forward(x), want, 1e-12, 1e-12));
}

// M for in -> out by hand from ONNX's reference rules.
TEST(Resize, MatricesFollowOnnxsReferenceRules) {
  const auto matrix = [](int64_t in, int64_t out, double scale, const std::string& mode,
                         const std::string& transform, const std::string& nearest) {
    return ops::resize_matrix(in, out, scale, {mode, transform, nearest});
  };
  const auto rows = [](const std::vector<std::vector<double>>& r) {
    std::vector<at::Tensor> t;
    for (const auto& row : r) t.push_back(at::tensor(row, at::kDouble));
    return at::stack(t);
  };
  // Nearest, asymmetric, floor: x = i / 2.
  EXPECT_TRUE(at::equal(matrix(3, 6, 2, "nearest", "asymmetric", "floor"),
                        rows({{1, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 1, 0}, {0, 0, 1}, {0, 0, 1}})));
  // Nearest, asymmetric: x = i / 2 ties at 0.5 and 1.5, which the rounding modes settle apart.
  EXPECT_TRUE(at::equal(matrix(2, 4, 2, "nearest", "asymmetric", "round_prefer_floor"),
                        rows({{1, 0}, {1, 0}, {0, 1}, {0, 1}})));
  EXPECT_TRUE(at::equal(matrix(2, 4, 2, "nearest", "asymmetric", "round_prefer_ceil"),
                        rows({{1, 0}, {0, 1}, {0, 1}, {0, 1}})));
  // Linear, half_pixel: x = (i + 0.5) / 2 − 0.5 = −0.25, 0.25, 0.75, 1.25, the ends clamped.
  EXPECT_TRUE(at::allclose(matrix(2, 4, 2, "linear", "half_pixel", ""),
                           rows({{1, 0}, {0.75, 0.25}, {0.25, 0.75}, {0, 1}}), 0, 1e-15));
  // Linear, align_corners: x = i · 2 / 4.
  EXPECT_TRUE(at::allclose(matrix(3, 5, 5.0 / 3, "linear", "align_corners", ""),
                           rows({{1, 0, 0}, {0.5, 0.5, 0}, {0, 1, 0}, {0, 0.5, 0.5}, {0, 0, 1}}), 0,
                           1e-15));
  // Downsampling, nearest, half_pixel: x = (i + 0.5) · 2 − 0.5 = 0.5, 2.5.
  EXPECT_TRUE(at::equal(matrix(4, 2, 0.5, "nearest", "half_pixel", "round_prefer_floor"),
                        rows({{1, 0, 0, 0}, {0, 0, 1, 0}})));
  EXPECT_THROW((void)matrix(2, 4, 2, "cubic", "half_pixel", ""), InvalidArgument);
}

// x [1, 2, 3, 4] -> `op` (scales or sizes as constant inputs) -> y.
OnnxBuilder resize_model(const std::string& op, int64_t opset, const std::vector<float>& scales,
                         const std::vector<int64_t>& sizes, std::vector<io::OnnxAttribute> attrs) {
  OnnxBuilder b;
  b.model().opset = opset;
  b.input("x", {1, 2, 3, 4}).output("y");
  std::vector<std::string> inputs{"x"};
  if (op == "Resize" && opset >= 11) inputs.emplace_back("");  // roi
  if (!scales.empty()) {
    b.initializer("scales", at::tensor(scales));
    inputs.emplace_back("scales");
  } else {
    inputs.emplace_back("");
  }
  if (!sizes.empty()) {
    b.initializer("sizes", at::tensor(sizes, at::kLong));
    inputs.emplace_back("sizes");
  }
  b.node("resize", op, inputs, {"y"}, std::move(attrs));
  return b;
}

TEST(Resize, ForwardIsLibTorchsUpsamplingAndBackwardIsTheAdjoint) {
  c10::NoGradGuard no_grad;
  Rng rng(33);
  const at::Tensor x = rng.normal({3, 2, 3, 4}).to(at::kDouble);
  struct Case {
    std::string name;
    OnnxBuilder model;
    at::Tensor want;
  };
  const std::vector<Case> cases{
      {"Upsample 9 nearest x2", resize_model("Upsample", 9, {1, 1, 2, 2}, {}, {}),
       at::upsample_nearest2d(x, {6, 8})},
      {"Resize 13 nearest asymmetric floor x(2, 3)",
       resize_model("Resize", 13, {1, 1, 2, 3}, {},
                    {attr_string("coordinate_transformation_mode", "asymmetric"),
                     attr_string("nearest_mode", "floor")}),
       at::upsample_nearest2d(x, {6, 12})},
      {"Resize 13 nearest half_pixel round_prefer_ceil to (5, 7)",
       resize_model("Resize", 13, {}, {1, 2, 5, 7},
                    {attr_string("nearest_mode", "round_prefer_ceil")}),
       at::_upsample_nearest_exact2d(x, {5, 7})},
      {"Resize 13 linear half_pixel x2",
       resize_model("Resize", 13, {1, 1, 2, 2}, {}, {attr_string("mode", "linear")}),
       at::upsample_bilinear2d(x, {6, 8}, false)},
      {"Resize 13 linear align_corners to (5, 9)",
       resize_model("Resize", 13, {}, {1, 2, 5, 9},
                    {attr_string("mode", "linear"),
                     attr_string("coordinate_transformation_mode", "align_corners")}),
       at::upsample_bilinear2d(x, {5, 9}, true)},
      {"Resize 18 linear, axes (3, 2)",
       resize_model("Resize", 18, {3, 2}, {},
                    {attr_string("mode", "linear"), attr_ints("axes", {3, 2})}),
       at::upsample_bilinear2d(x, {6, 12}, false)},
  };
  for (const Case& c : cases) {
    const BoundGraph g = load_built(c.model);
    const at::Tensor y = g.forward(x);
    ASSERT_EQ(y.sizes(), c.want.sizes()) << c.name;
    EXPECT_TRUE(at::allclose(y, c.want, 1e-12, 1e-12)) << c.name;
    expect_affine_step(g, rng, c.name);
  }
}

TEST(UpsamplingOnnx, UnimplementedVariantsAreRefusedInOneLine) {
  const auto linear = attr_string("mode", "linear");
  expect_refused(resize_model("Resize", 13, {1, 1, 2, 2}, {}, {attr_string("mode", "cubic")}),
                 {"'resize'", "cubic"}, "upsample.onnx");
  expect_refused(
      resize_model("Resize", 13, {1, 1, 2, 2}, {},
                   {linear, attr_string("coordinate_transformation_mode", "tf_crop_and_resize")}),
      {"tf_crop_and_resize"}, "upsample.onnx");
  expect_refused(resize_model("Resize", 18, {1, 1, 2, 2}, {}, {linear, attr_int("antialias", 1)}),
                 {"antialias"}, "upsample.onnx");
  expect_refused(resize_model("Resize", 18, {}, {1, 2, 5, 5},
                              {attr_string("keep_aspect_ratio_policy", "not_larger")}),
                 {"not_larger"}, "upsample.onnx");
  expect_refused(resize_model("Resize", 13, {2, 1, 2, 2}, {}, {}), {"batch"}, "upsample.onnx");
  expect_refused(resize_model("Upsample", 9, {1, 1, 1.5, 2}, {}, {}), {"non-integer"},
                 "upsample.onnx");
  {
    OnnxBuilder b;
    b.model().opset = 8;
    b.input("x", {1, 2, 3, 4}).output("y");
    b.node("up", "Upsample", {"x"}, {"y"});
    expect_refused(b, {"'up'", "attribute"}, "upsample.onnx");
  }
  const auto transpose = [](std::vector<io::OnnxAttribute> attrs) {
    OnnxBuilder b;
    b.input("x", {1, 2, 3, 3}).output("y");
    b.initializer("w", at::ones({2, 2, 3, 3}));
    b.node("up", "ConvTranspose", {"x", "w"}, {"y"}, std::move(attrs));
    return b;
  };
  expect_refused(transpose({attr_int("group", 2)}), {"'up'", "group"}, "upsample.onnx");
  expect_refused(transpose({attr_string("auto_pad", "SAME_UPPER")}), {"SAME_UPPER"},
                 "upsample.onnx");
  expect_refused(transpose({attr_ints("output_shape", {6, 6})}), {"output_shape"}, "upsample.onnx");
  EXPECT_THROW((void)load_built(
                   transpose({attr_ints("output_padding", {2, 0}), attr_ints("strides", {2, 2})})),
               ModelError);
}

}  // namespace
}  // namespace distcrown
