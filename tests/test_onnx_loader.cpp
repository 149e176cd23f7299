// ONNX import: models built in the test (tests/onnx_builder.hpp) exercising every supported
// operator are serialized, loaded back with load_onnx_bytes and their forward pass compared with
// the same network computed directly with ATen; malformed models fail with the documented error
// type and a message naming the file and the node; the shared VNN-COMP models load.
#include "distcrown/io/onnx_loader.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "distcrown/util/error.hpp"
#include "error_text.hpp"
#include "fixtures.hpp"
#include "io/onnx_model.hpp"
#include "onnx_builder.hpp"

namespace distcrown {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::attr_tensor;
using testing::OnnxBuilder;

constexpr int64_t kBatch = 3;  // forward passes run on a batch of random inputs

// Random float32 values scaled to keep every activation of order 1.
at::Tensor randn(const std::vector<int64_t>& shape, double scale = 0.5) {
  return at::randn(shape, at::kFloat) * scale;
}

at::Tensor int64s(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

BoundGraph load(const OnnxBuilder& b, const std::string& source = "test.onnx") {
  return io::load_onnx_bytes(b.bytes(), source);
}

// |got - want| <= tol * max(1, |want|) elementwise, with equal shapes.
void expect_close(const at::Tensor& got, const at::Tensor& want, double tol = 1e-6) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const at::Tensor g = got.to(at::kDouble);
  const at::Tensor w = want.to(at::kDouble);
  const double err = ((g - w).abs() / w.abs().clamp_min(1)).max().item<double>();
  EXPECT_LE(err, tol) << "largest relative difference between the loaded graph and ATen";
}

// Loads the model, checks its input/output shapes (batch 1) and compares graph.forward with
// `reference` on a batch of random inputs.
void expect_forward_matches(const OnnxBuilder& b, const std::vector<int64_t>& input_shape,
                            const std::vector<int64_t>& output_shape,
                            const std::function<at::Tensor(const at::Tensor&)>& reference) {
  const BoundGraph g = load(b);
  EXPECT_EQ(g.input_shape(), input_shape);
  EXPECT_EQ(g.output_shape(), output_shape);
  std::vector<int64_t> shape = input_shape;
  shape[0] = kBatch;
  for (int trial = 0; trial < 3; ++trial) {
    const at::Tensor x = at::randn(shape, at::kFloat);
    expect_close(g.forward(x), reference(x));
  }
}

const char* error_kind(const Error& e) {
  if (dynamic_cast<const UnsupportedError*>(&e)) return "UnsupportedError";
  if (dynamic_cast<const ModelError*>(&e)) return "ModelError";
  if (dynamic_cast<const ParseError*>(&e)) return "ParseError";
  if (dynamic_cast<const InvalidArgument*>(&e)) return "InvalidArgument";
  return "Error";
}

// Expects `fn` to throw a distcrown error of exactly the kind `kind` whose message contains every
// fragment.
void expect_error(const std::function<void()>& fn, const std::string& kind,
                  const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected " << kind;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(error_kind(e), kind) << msg;
    for (const auto& f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "message lacks '" << f << "': " << msg;
    }
  } catch (const c10::Error& e) {
    ADD_FAILURE() << "a c10::Error escaped instead of " << kind << ": "
                  << e.what_without_backtrace();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a std::exception escaped instead of " << kind << ": " << e.what();
  }
}

void expect_load_error(const OnnxBuilder& b, const std::string& kind,
                       const std::vector<std::string>& fragments) {
  const std::string bytes = b.bytes();
  expect_error([&] { (void)io::load_onnx_bytes(bytes, "bad_model.onnx"); }, kind, fragments);
}

// A small MLP (Flatten, Gemm, Relu): the real model the corruption tests cut up.
OnnxBuilder small_mlp() {
  OnnxBuilder b;
  b.input("x", {1, 2, 3}).output("y", {1, 3});
  b.initializer("W1", randn({8, 6})).initializer("b1", randn({8}));
  b.initializer("W2", randn({3, 8})).initializer("b2", randn({3}));
  b.node("flatten", "Flatten", {"x"}, {"f"});
  b.node("fc1", "Gemm", {"f", "W1", "b1"}, {"h"}, {attr_int("transB", 1)});
  b.node("relu1", "Relu", {"h"}, {"r"});
  b.node("fc2", "Gemm", {"r", "W2", "b2"}, {"y"}, {attr_int("transB", 1)});
  return b;
}

class OnnxLoader : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(20240601); }
  c10::NoGradGuard no_grad_;
};

// ---------------------------------------------------------------------------------------------
// Round trips: build, serialize, load, compare with ATen.

TEST_F(OnnxLoader, MlpGemmTransBAlphaBeta) {
  const at::Tensor W1 = randn({4, 6}), b1 = randn({4});     // transB=1: [out, in]
  const at::Tensor W2 = randn({4, 5}), c2 = randn({5});     // transB=0: [in, out]
  const at::Tensor W3 = randn({2, 5}), c3 = randn({1, 2});  // C given as [1, out]
  const at::Tensor W4 = randn({2, 2});                      // default transB, no C
  OnnxBuilder b;
  b.input("x", {1, 6}).output("y", {1, 2});
  b.initializer("W1", W1).initializer("b1", b1).initializer("W2", W2).initializer("c2", c2);
  b.initializer("W3", W3).initializer("c3", c3).initializer("W4", W4);
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h1"}, {attr_int("transB", 1)});
  b.node("relu1", "Relu", {"h1"}, {"r1"});
  b.node("fc2", "Gemm", {"r1", "W2", "c2"}, {"h2"},
         {attr_int("transB", 0), attr_float("alpha", 0.5), attr_float("beta", 2.0)});
  b.node("relu2", "Relu", {"h2"}, {"r2"});
  b.node("fc3", "Gemm", {"r2", "W3", "c3"}, {"h3"}, {attr_int("transB", 1)});
  b.node("fc4", "Gemm", {"h3", "W4"}, {"y"});
  expect_forward_matches(b, {1, 6}, {1, 2}, [&](const at::Tensor& x) {
    const at::Tensor r1 = at::relu(at::linear(x, W1, b1));
    const at::Tensor r2 = at::relu(0.5 * at::matmul(r1, W2) + 2.0 * c2);
    return at::matmul(at::linear(r2, W3) + c3, W4);
  });
}

TEST_F(OnnxLoader, MatMulAdd) {
  const at::Tensor W1 = randn({5, 8}), b1 = randn({8});
  const at::Tensor W2 = randn({8, 3}), b2 = randn({3});
  OnnxBuilder b;
  b.input("x", {-1, 5}).output("y", {-1, 3});  // symbolic batch dimension: taken as 1
  b.initializer("W1", W1).initializer("b1", b1).initializer("W2", W2).initializer("b2", b2);
  b.node("mm1", "MatMul", {"x", "W1"}, {"m1"});
  b.node("add1", "Add", {"m1", "b1"}, {"a1"});
  b.node("relu1", "Relu", {"a1"}, {"r1"});
  b.node("mm2", "MatMul", {"r1", "W2"}, {"m2"});
  b.node("add2", "Add", {"b2", "m2"}, {"y"});  // the constant first
  expect_forward_matches(b, {1, 5}, {1, 3}, [&](const at::Tensor& x) {
    const at::Tensor r1 = at::relu(at::matmul(x, W1) + b1);
    return b2 + at::matmul(r1, W2);
  });
}

TEST_F(OnnxLoader, ConvStridePadDilationFlattenGemm) {
  const at::Tensor w1 = randn({4, 2, 3, 3}), b1 = randn({4});
  const at::Tensor w2 = randn({3, 4, 2, 2});
  const at::Tensor W3 = randn({5, 63}, 0.1), b3 = randn({5});
  OnnxBuilder b;
  b.input("x", {1, 2, 9, 9}).output("y", {1, 5});
  b.initializer("w1", w1).initializer("b1", b1).initializer("w2", w2);
  b.initializer("W3", W3).initializer("b3", b3);
  b.node("conv1", "Conv", {"x", "w1", "b1"}, {"c1"},
         {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 1}),
          attr_ints("pads", {1, 1, 1, 1}), attr_ints("dilations", {1, 1}), attr_int("group", 1),
          attr_string("auto_pad", "NOTSET")});
  b.node("relu1", "Relu", {"c1"}, {"r1"});
  b.node("conv2", "Conv", {"r1", "w2"}, {"c2"}, {attr_ints("dilations", {2, 2})});  // no bias
  b.node("flatten", "Flatten", {"c2"}, {"f"}, {attr_int("axis", 1)});
  b.node("fc", "Gemm", {"f", "W3", "b3"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 2, 9, 9}, {1, 5}, [&](const at::Tensor& x) {
    const at::Tensor r1 = at::relu(at::conv2d(x, w1, b1, {2, 1}, {1, 1}, {1, 1}));
    const at::Tensor c2 = at::conv2d(r1, w2, at::Tensor(), {1, 1}, at::IntArrayRef{0, 0}, {2, 2});
    return at::linear(c2.flatten(1), W3, b3);
  });
}

// A 1-D convolution (pensieve's), through the 2-D one on [B, C, 1, L].
TEST_F(OnnxLoader, Conv1dStridePadDilation) {
  const at::Tensor w1 = randn({4, 2, 3}), b1 = randn({4});
  const at::Tensor w2 = randn({3, 4, 2});
  OnnxBuilder b;
  b.input("x", {1, 2, 9}).output("y");
  b.initializer("w1", w1).initializer("b1", b1).initializer("w2", w2);
  b.node("conv1", "Conv", {"x", "w1", "b1"}, {"c1"},
         {attr_ints("kernel_shape", {3}), attr_ints("strides", {2}), attr_ints("pads", {1, 1})});
  b.node("relu1", "Relu", {"c1"}, {"r1"});
  b.node("conv2", "Conv", {"r1", "w2"}, {"y"}, {attr_ints("dilations", {2})});
  expect_forward_matches(b, {1, 2, 9}, {1, 3, 3}, [&](const at::Tensor& x) {
    const at::Tensor r1 = at::relu(at::conv1d(x, w1, b1, at::IntArrayRef{2}, at::IntArrayRef{1}));
    return at::conv1d(r1, w2, at::Tensor(), at::IntArrayRef{1}, at::IntArrayRef{0},
                      at::IntArrayRef{2});
  });
}

TEST_F(OnnxLoader, BatchNormalizationAfterConv) {
  // Per-channel statistics on a 4-D tensor [1, C, H, W], C = 4.
  const at::Tensor w = randn({4, 3, 3, 3});
  const at::Tensor gamma = 1 + randn({4}, 0.2), beta = randn({4}), mean = randn({4});
  const at::Tensor var = 0.5 + at::rand({4});
  const at::Tensor W = randn({6, 100}, 0.1);
  OnnxBuilder b;
  b.input("x", {1, 3, 5, 5}).output("y", {1, 6});
  b.initializer("w", w).initializer("W", W).initializer("gamma", gamma);
  b.initializer("beta", beta).initializer("mean", mean).initializer("var", var);
  b.node("conv", "Conv", {"x", "w"}, {"c"}, {attr_ints("pads", {1, 1, 1, 1})});
  b.node("bn", "BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"},
         {attr_float("epsilon", 1e-3)});
  b.node("relu", "Relu", {"n"}, {"r"});
  b.node("flatten", "Flatten", {"r"}, {"f"});
  b.node("fc", "Gemm", {"f", "W"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 3, 5, 5}, {1, 6}, [&](const at::Tensor& x) {
    const at::Tensor c = at::conv2d(x, w, at::Tensor(), {1, 1}, {1, 1});
    // epsilon is a float attribute: 1e-3 rounded to float32.
    const at::Tensor n =
        at::batch_norm(c, gamma, beta, mean, var, false, 0.1, double(1e-3f), false);
    return at::linear(at::relu(n).flatten(1), W);
  });
}

TEST_F(OnnxLoader, BatchNormalizationAfterGemm) {
  // A 2-D tensor [1, C], C = 6, with the default epsilon (1e-5).
  const at::Tensor W = randn({6, 5});
  const at::Tensor gamma = 1 + randn({6}, 0.2), beta = randn({6}), mean = randn({6});
  const at::Tensor var = 0.5 + at::rand({6});
  OnnxBuilder b;
  b.input("x", {1, 5}).output("y", {1, 6});
  b.initializer("W", W).initializer("gamma", gamma).initializer("beta", beta);
  b.initializer("mean", mean).initializer("var", var);
  b.node("fc", "Gemm", {"x", "W"}, {"h"}, {attr_int("transB", 1)});
  b.node("bn", "BatchNormalization", {"h", "gamma", "beta", "mean", "var"}, {"y"});
  expect_forward_matches(b, {1, 5}, {1, 6}, [&](const at::Tensor& x) {
    return at::batch_norm(at::linear(x, W), gamma, beta, mean, var, false, 0.1, 1e-5, false);
  });
}

TEST_F(OnnxLoader, NormalisationBySubDivMulConstants) {
  // Scalar mean/std (as examples/digits_mlp.onnx), then per-channel ones, then c - x and c * x.
  const at::Tensor mean = at::scalar_tensor(0.3056, at::kFloat);
  const at::Tensor std = at::scalar_tensor(0.3763, at::kFloat);
  const at::Tensor cmean = randn({1, 2, 1, 1}), cstd = 0.5 + at::rand({1, 2, 1, 1});
  const at::Tensor c = randn({1, 2, 3, 3}), scale = randn({1, 2, 1, 1});
  const at::Tensor W = randn({3, 18}, 0.2);
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y", {1, 3});
  b.initializer("mean", mean).initializer("std", std).initializer("cmean", cmean);
  b.initializer("cstd", cstd).initializer("c", c).initializer("scale", scale);
  b.initializer("W", W);
  b.node("sub_mean", "Sub", {"x", "mean"}, {"s1"});
  b.node("div_std", "Div", {"s1", "std"}, {"d1"});
  b.node("sub_cmean", "Sub", {"d1", "cmean"}, {"s2"});
  b.node("div_cstd", "Div", {"s2", "cstd"}, {"d2"});
  b.node("c_minus", "Sub", {"c", "d2"}, {"s3"});  // Sub(const, x)
  b.node("scale", "Mul", {"scale", "s3"}, {"m1"});
  b.node("mul_std", "Mul", {"m1", "std"}, {"m2"});
  b.node("flatten", "Flatten", {"m2"}, {"f"});
  b.node("fc", "Gemm", {"f", "W"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 2, 3, 3}, {1, 3}, [&](const at::Tensor& x) {
    const at::Tensor d2 = ((x - mean) / std - cmean) / cstd;
    return at::linear(((scale * (c - d2)) * std).flatten(1), W);
  });
}

TEST_F(OnnxLoader, ReshapeZeroAndMinusOneFromInitializersAndConstantNodes) {
  const at::Tensor W1 = randn({6, 24}, 0.2), W2 = randn({2, 6});
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 4}).output("y", {1, 2});
  b.initializer("W1", W1).initializer("W2", W2).initializer("shape1", int64s({0, -1}));
  b.node("shape2", "Constant", {}, {"shape2"}, {attr_tensor("value", int64s({0, 2, -1}))});
  b.node("shape3", "Constant", {}, {"shape3"}, {attr_ints("value_ints", {1, -1})});
  b.node("reshape1", "Reshape", {"x", "shape1"}, {"v1"});  // [1, 24]
  b.node("fc1", "Gemm", {"v1", "W1"}, {"h1"}, {attr_int("transB", 1)});
  b.node("reshape2", "Reshape", {"h1", "shape2"}, {"v2"});  // [1, 2, 3]
  b.node("relu", "Relu", {"v2"}, {"r"});
  b.node("reshape3", "Reshape", {"r", "shape3"}, {"v3"});  // [1, 6]
  b.node("fc2", "Gemm", {"v3", "W2"}, {"y"}, {attr_int("transB", 1)});
  const BoundGraph g = load(b);
  EXPECT_EQ(g.node(g.output()).shape, (std::vector<int64_t>{1, 2}));
  expect_forward_matches(b, {1, 2, 3, 4}, {1, 2}, [&](const at::Tensor& x) {
    const at::Tensor h1 = at::linear(x.reshape({x.size(0), -1}), W1);
    const at::Tensor r = at::relu(h1.reshape({x.size(0), 2, 3}));
    return at::linear(r.reshape({x.size(0), -1}), W2);
  });
}

TEST_F(OnnxLoader, ShapeIsAConstant) {
  // Flatten, then back to the input's shape through Shape(x) (a constant at import).
  const at::Tensor w = randn({2, 2, 2, 2});
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y", {1, 8});
  b.initializer("w", w);
  b.node("flatten1", "Flatten", {"x"}, {"f1"});
  b.node("relu", "Relu", {"f1"}, {"r"});
  b.node("shape", "Shape", {"x"}, {"s"});
  b.node("unflatten", "Reshape", {"r", "s"}, {"u"});
  b.node("conv", "Conv", {"u", "w"}, {"c"});
  b.node("flatten2", "Flatten", {"c"}, {"y"});
  expect_forward_matches(b, {1, 2, 3, 3}, {1, 8}, [&](const at::Tensor& x) {
    return at::conv2d(at::relu(x), w).flatten(1);
  });
}

TEST_F(OnnxLoader, ExportedFlattenPatternIsFolded) {
  // PyTorch's export of x.view(x.size(0), -1): Shape -> Gather(0) -> Concat(-1)
  // -> Reshape; plus a Slice of a constant weight.
  const at::Tensor W = randn({4, 18});
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y", {1, 3});
  b.initializer("W", W);
  b.initializer("zero", int64s({0}));
  b.initializer("minus1", int64s({-1}));
  b.initializer("starts", int64s({1}));
  b.initializer("ends", int64s({100}));
  b.node("shape", "Shape", {"x"}, {"s"});
  b.node("gather", "Gather", {"s", "zero"}, {"n"}, {attr_int("axis", 0)});
  b.node("concat", "Concat", {"n", "minus1"}, {"target"}, {attr_int("axis", 0)});
  b.node("reshape", "Reshape", {"x", "target"}, {"flat"});
  b.node("slice", "Slice", {"W", "starts", "ends"}, {"W3"});  // rows 1.. of W: [3, 18]
  b.node("fc", "Gemm", {"flat", "W3"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 2, 3, 3}, {1, 3}, [&](const at::Tensor& x) {
    return at::linear(x.reshape({x.size(0), -1}), W.slice(0, 1));
  });
}

TEST_F(OnnxLoader, ShapeArithmeticOnVariables) {
  // Concat and Expand of bounded tensors are operators (ops/concat.cpp, ops/reshape.cpp); an
  // Expand that would broadcast the batch dim is refused.
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 8});
  b.node("cat", "Concat", {"x", "x"}, {"y"}, {attr_int("axis", 1)});
  expect_forward_matches(b, {1, 4}, {1, 8}, [](const at::Tensor& x) { return at::cat({x, x}, 1); });
  OnnxBuilder e;
  e.input("x", {1, 4, 1}).output("y", {1, 4, 3});
  e.initializer("shape", int64s({1, 3}));
  e.node("expand", "Expand", {"x", "shape"}, {"y"});
  expect_forward_matches(e, {1, 4, 1}, {1, 4, 3}, [](const at::Tensor& x) {
    return x.expand({x.size(0), 4, 3});
  });
  OnnxBuilder batch;
  batch.input("x", {1, 4}).output("y", {2, 4});
  batch.initializer("shape", int64s({2, 4}));
  batch.node("expand", "Expand", {"x", "shape"}, {"y"});
  try {
    load(batch);
    FAIL() << "an Expand of the batch dim was accepted";
  } catch (const UnsupportedError& err) {
    EXPECT_NE(std::string(err.what()).find("broadcasts the batch dimension"), std::string::npos)
        << err.what();
  }
}

TEST_F(OnnxLoader, IdentityAndDropout) {
  const at::Tensor W = randn({5, 4}), bias = randn({5});
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 5});
  b.initializer("W", W).initializer("bias", bias);
  b.initializer("ratio", at::scalar_tensor(0.5, at::kFloat));
  b.node("id_x", "Identity", {"x"}, {"x1"});
  b.node("id_W", "Identity", {"W"}, {"W1"});  // an identity of a constant stays a constant
  b.node("fc", "Gemm", {"x1", "W1", "bias"}, {"h"}, {attr_int("transB", 1)});
  b.node("drop1", "Dropout", {"h"}, {"d1", "mask1"});
  b.node("relu", "Relu", {"d1"}, {"r"});
  b.node("drop2", "Dropout", {"r", "ratio"}, {"d2"}, {attr_int("seed", 7)});
  b.node("id_y", "Identity", {"d2"}, {"y"});
  expect_forward_matches(b, {1, 4}, {1, 5},
                         [&](const at::Tensor& x) { return at::relu(at::linear(x, W, bias)); });
}

TEST_F(OnnxLoader, ResidualAddAndSubOfVariables) {
  const at::Tensor W1 = randn({4, 4}), W2 = randn({4, 4}), W3 = randn({3, 4});
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 3});
  b.initializer("W1", W1).initializer("W2", W2).initializer("W3", W3);
  b.node("fc1", "Gemm", {"x", "W1"}, {"h1"}, {attr_int("transB", 1)});
  b.node("relu1", "Relu", {"h1"}, {"r1"});
  b.node("fc2", "Gemm", {"r1", "W2"}, {"h2"}, {attr_int("transB", 1)});
  b.node("residual", "Add", {"h2", "x"}, {"a"});
  b.node("relu2", "Relu", {"a"}, {"r2"});
  b.node("diff", "Sub", {"r2", "r1"}, {"d"});
  b.node("fc3", "Gemm", {"d", "W3"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 4}, {1, 3}, [&](const at::Tensor& x) {
    const at::Tensor r1 = at::relu(at::linear(x, W1));
    const at::Tensor r2 = at::relu(at::linear(r1, W2) + x);
    return at::linear(r2 - r1, W3);
  });
}

TEST_F(OnnxLoader, TransposeUnsqueezeSqueezeNegCast) {
  const at::Tensor W = randn({2, 6});
  OnnxBuilder b;  // opset 13: axes are inputs
  b.input("x", {1, 2, 3}).output("y", {1, 2});
  b.initializer("W", W).initializer("axes", int64s({1}));
  b.node("transpose", "Transpose", {"x"}, {"t"}, {attr_ints("perm", {0, 2, 1})});  // [1, 3, 2]
  b.node("unsqueeze", "Unsqueeze", {"t", "axes"}, {"u"});                          // [1, 1, 3, 2]
  b.node("squeeze", "Squeeze", {"u", "axes"}, {"s"});                              // [1, 3, 2]
  b.node("neg", "Neg", {"s"}, {"n"});
  b.node("cast", "Cast", {"n"}, {"c"}, {attr_int("to", io::kOnnxFloat)});
  b.node("flatten", "Flatten", {"c"}, {"f"});
  b.node("fc", "Gemm", {"f", "W"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b, {1, 2, 3}, {1, 2}, [&](const at::Tensor& x) {
    return at::linear((-x.permute({0, 2, 1})).flatten(1), W);
  });

  OnnxBuilder b11;  // opset 11: axes are attributes
  b11.model().opset = 11;
  b11.input("x", {1, 6}).output("y", {1, 2});
  b11.initializer("W", W);
  b11.node("unsqueeze", "Unsqueeze", {"x"}, {"u"}, {attr_ints("axes", {2})});  // [1, 6, 1]
  b11.node("squeeze", "Squeeze", {"u"}, {"s"}, {attr_ints("axes", {-1})});     // [1, 6]
  b11.node("fc", "Gemm", {"s", "W"}, {"y"}, {attr_int("transB", 1)});
  expect_forward_matches(b11, {1, 6}, {1, 2},
                         [&](const at::Tensor& x) { return at::linear(x, W); });
}

TEST_F(OnnxLoader, ConstantSubgraphsAreFolded) {
  // W = Transpose(Wt) * 2 and bias = -b0 + Cast<float>(bi): computed at import, no graph nodes.
  const at::Tensor Wt = randn({4, 3}), b0 = randn({3});
  const at::Tensor bi = at::tensor(std::vector<int32_t>{1, -2, 3}, at::kInt);
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 3});
  b.initializer("Wt", Wt).initializer("b0", b0).initializer("bi", bi);
  b.node("two", "Constant", {}, {"two"}, {attr_float("value_float", 2.0)});
  b.node("transpose", "Transpose", {"Wt"}, {"WtT"});  // default perm reverses the axes
  b.node("double", "Mul", {"WtT", "two"}, {"W"});
  b.node("neg", "Neg", {"b0"}, {"nb0"});
  b.node("cast", "Cast", {"bi"}, {"bf"}, {attr_int("to", io::kOnnxFloat)});
  b.node("bias", "Add", {"nb0", "bf"}, {"bias"});
  b.node("fc", "Gemm", {"x", "W", "bias"}, {"y"}, {attr_int("transB", 1)});
  const BoundGraph g = load(b);
  EXPECT_EQ(g.size(), 2) << "the input and one Linear node";
  expect_forward_matches(b, {1, 4}, {1, 3}, [&](const at::Tensor& x) {
    return at::linear(x, Wt.t() * 2, -b0 + bi.to(at::kFloat));
  });
}

// ---------------------------------------------------------------------------------------------
// GELU as torch.onnx exports it before opset 20 (io/onnx_gelu_fusion.hpp): fused into one Gelu
// node where the match is exact, left as its nodes otherwise.

// How the exported GELU subgraph on h = Gemm(x) is spelled, and the ways a spelling can miss.
struct ErfGelu {
  enum class Order {
    kProductThenHalf,  // Mul(Mul(h, a), 0.5): torch.onnx's TorchScript exporter
    kHalfOfSum,        // Mul(h, Mul(0.5, a)): onnxscript's aten_gelu
    kHalfOfInput,      // Mul(Mul(h, 0.5), a)
  };
  Order order = Order::kProductThenHalf;
  bool mul_by_inverse = false;  // Mul(h, 1/√2) instead of Div(h, √2)
  bool constant_nodes = false;  // the constants as Constant nodes, not initializers
  bool swap = false;            // every Mul and Add with its operands the other way round
  bool shape_one = false;       // the constants of shape [1], not scalars
  float root2 = float(std::sqrt(2.0));
  float one = 1;
  float half = 0.5;
  bool erf_used_elsewhere = false;  // Erf's output also added to the result
  bool other_x = false;             // the outer product takes Relu(h), not h
  bool identity_after_erf = false;  // Identity between Erf and Add: the same function, no match
};

// Gemm (4 → 6) → the subgraph → Gemm (6 → 3); `reference` computes the same in ATen, node by
// node with the float32 constants (the unfused semantics).
OnnxBuilder erf_gelu_model(const ErfGelu& s, const at::Tensor& W1, const at::Tensor& W2,
                           std::function<at::Tensor(const at::Tensor&)>* reference) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 3});
  b.initializer("W1", W1).initializer("W2", W2);
  const auto constant = [&](const std::string& name, float v) {
    at::Tensor t = at::scalar_tensor(v, at::kFloat);
    if (s.shape_one) t = t.reshape({1});
    if (s.constant_nodes) {
      b.node(name, "Constant", {}, {name}, {attr_tensor("value", t)});
    } else {
      b.initializer(name, t);
    }
  };
  const auto binary = [&](const std::string& op, const std::string& a, const std::string& c,
                          const std::string& out) {
    b.node(out, op, s.swap ? std::vector<std::string>{c, a} : std::vector<std::string>{a, c},
           {out});
  };
  const float inv_root2 = float(1 / std::sqrt(2.0));
  b.node("fc1", "Gemm", {"x", "W1"}, {"h"}, {attr_int("transB", 1)});
  std::string x = "h";
  if (s.other_x) {
    b.node("relu", "Relu", {"h"}, {"r"});
    x = "r";
  }
  if (s.mul_by_inverse) {
    constant("inv_root2", inv_root2);
    binary("Mul", "h", "inv_root2", "d");
  } else {
    constant("root2", s.root2);
    b.node("d", "Div", {"h", "root2"}, {"d"});
  }
  b.node("e", "Erf", {"d"}, {"e"});
  if (s.identity_after_erf) b.node("e_id", "Identity", {"e"}, {"e_id"});
  constant("one", s.one);
  binary("Add", s.identity_after_erf ? "e_id" : "e", "one", "a");
  constant("half", s.half);
  const std::string g = s.erf_used_elsewhere ? "g0" : "g";
  switch (s.order) {
    case ErfGelu::Order::kProductThenHalf:
      binary("Mul", x, "a", "p");
      binary("Mul", "p", "half", g);
      break;
    case ErfGelu::Order::kHalfOfSum:
      binary("Mul", "half", "a", "p");
      binary("Mul", x, "p", g);
      break;
    case ErfGelu::Order::kHalfOfInput:
      binary("Mul", x, "half", "p");
      binary("Mul", "p", "a", g);
      break;
  }
  if (s.erf_used_elsewhere) binary("Add", "g0", "e", "g");
  b.node("fc2", "Gemm", {"g", "W2"}, {"y"}, {attr_int("transB", 1)});
  *reference = [=](const at::Tensor& in) {
    const at::Tensor h = at::linear(in, W1);
    const at::Tensor d = s.mul_by_inverse ? h * inv_root2 : h / s.root2;
    const at::Tensor e = at::erf(d);
    const at::Tensor xv = s.other_x ? at::relu(h) : h;
    at::Tensor out = xv * (e + s.one) * s.half;
    if (s.erf_used_elsewhere) out = out + e;
    return at::linear(out, W2);
  };
  return b;
}

// How many nodes of the loaded graph have op type `op`.
int count_op(const BoundGraph& g, const std::string& op) {
  int n = 0;
  for (int i = 1; i < g.size(); ++i) n += g.node(i).op->op_type() == op ? 1 : 0;
  return n;
}

TEST_F(OnnxLoader, ExportedErfGeluIsFusedIntoOneGeluNode) {
  const at::Tensor W1 = randn({6, 4}, 1.5), W2 = randn({3, 6});
  for (const auto order : {ErfGelu::Order::kProductThenHalf, ErfGelu::Order::kHalfOfSum,
                           ErfGelu::Order::kHalfOfInput}) {
    for (int variant = 0; variant < 16; ++variant) {
      ErfGelu s;
      s.order = order;
      s.mul_by_inverse = (variant & 1) != 0;
      s.constant_nodes = (variant & 2) != 0;
      s.swap = (variant & 4) != 0;
      s.shape_one = (variant & 8) != 0;
      SCOPED_TRACE("order " + std::to_string(int(order)) + " variant " + std::to_string(variant));
      std::function<at::Tensor(const at::Tensor&)> reference;
      const OnnxBuilder b = erf_gelu_model(s, W1, W2, &reference);
      const BoundGraph g = load(b);
      EXPECT_EQ(count_op(g, "Gelu"), 1);
      EXPECT_EQ(count_op(g, "Erf"), 0);
      EXPECT_EQ(g.size(), 4) << "input, Linear, Gelu, Linear";
      expect_forward_matches(b, {1, 4}, {1, 3}, reference);
      // The same function left as its nodes (an Identity between Erf and Add breaks the match):
      // the same forward values.
      ErfGelu same = s;
      same.identity_after_erf = true;
      const BoundGraph u = load(erf_gelu_model(same, W1, W2, &reference));
      EXPECT_EQ(count_op(u, "Gelu"), 0);
      EXPECT_EQ(count_op(u, "Erf"), 1);
      const at::Tensor in = at::randn({kBatch, 4}, at::kFloat);
      expect_close(g.forward(in), u.forward(in), 1e-6);
    }
  }
}

TEST_F(OnnxLoader, NearMissesOfExportedErfGeluAreNotFused) {
  const at::Tensor W1 = randn({6, 4}, 1.5), W2 = randn({3, 6});
  std::vector<std::pair<std::string, ErfGelu>> misses;
  for (const auto order : {ErfGelu::Order::kProductThenHalf, ErfGelu::Order::kHalfOfSum,
                           ErfGelu::Order::kHalfOfInput}) {
    const std::string o = " order " + std::to_string(int(order));
    ErfGelu s;
    s.order = order;
    s.half = 0.6F;
    misses.emplace_back("0.6 for 0.5" + o, s);
    s = ErfGelu{};
    s.order = order;
    s.half = 0.5F + 1e-6F;
    misses.emplace_back("0.5 + 1e-6 for 0.5" + o, s);
    s = ErfGelu{};
    s.order = order;
    s.root2 = 1.5F;
    misses.emplace_back("1.5 for √2" + o, s);
    s = ErfGelu{};
    s.order = order;
    s.one = 2;
    misses.emplace_back("2 for 1" + o, s);
    s = ErfGelu{};
    s.order = order;
    s.erf_used_elsewhere = true;
    misses.emplace_back("Erf's output used elsewhere" + o, s);
    s = ErfGelu{};
    s.order = order;
    s.other_x = true;
    misses.emplace_back("another tensor in the outer product" + o, s);
  }
  for (const auto& [what, s] : misses) {
    SCOPED_TRACE(what);
    std::function<at::Tensor(const at::Tensor&)> reference;
    const OnnxBuilder b = erf_gelu_model(s, W1, W2, &reference);
    const BoundGraph g = load(b);
    EXPECT_EQ(count_op(g, "Gelu"), 0);
    EXPECT_EQ(count_op(g, "Erf"), 1);
    expect_forward_matches(b, {1, 4}, {1, 3}, reference);
  }
}

TEST_F(OnnxLoader, ExportedErfGeluWithAnIntermediateUsedTwiceIsNotFused) {
  // A second use t = Neg(v) of one intermediate v, right after v's producer (so that the pattern's
  // node is still v's last reader), added to the result: y = fc2(g + t). Each keeps the nodes.
  const at::Tensor W1 = randn({6, 4}, 1.5), W2 = randn({3, 6});
  for (const auto order : {ErfGelu::Order::kProductThenHalf, ErfGelu::Order::kHalfOfSum,
                           ErfGelu::Order::kHalfOfInput}) {
    for (const std::string shared : {"d", "e", "a", "p"}) {
      SCOPED_TRACE(shared + " order " + std::to_string(int(order)));
      ErfGelu s;
      s.order = order;
      std::function<at::Tensor(const at::Tensor&)> reference;
      OnnxBuilder b = erf_gelu_model(s, W1, W2, &reference);
      auto& nodes = b.model().nodes;
      const auto producer = std::find_if(nodes.begin(), nodes.end(), [&](const io::OnnxNode& n) {
        return n.outputs.front() == shared;
      });
      ASSERT_NE(producer, nodes.end());
      nodes.insert(producer + 1, io::OnnxNode{"t", "Neg", "", {shared}, {"t"}, {}});
      nodes.back().inputs[0] = "g2";  // fc2
      nodes.insert(nodes.end() - 1, io::OnnxNode{"g2", "Add", "", {"g", "t"}, {"g2"}, {}});
      const BoundGraph g = load(b);
      EXPECT_EQ(count_op(g, "Gelu"), 0);
      EXPECT_EQ(count_op(g, "Erf"), 1);
    }
  }
}

TEST_F(OnnxLoader, LoadFromFileEqualsLoadFromBytes) {
  const OnnxBuilder b = small_mlp();
  testing::TempDir dir;
  const auto path = testing::write_file(dir / "mlp.onnx", b.bytes());
  const BoundGraph from_file = io::load_onnx(path.string());
  const BoundGraph from_bytes = load(b);
  const at::Tensor x = at::randn({kBatch, 2, 3});
  EXPECT_TRUE(at::equal(from_file.forward(x), from_bytes.forward(x)));
}

TEST_F(OnnxLoader, SerializeParseRoundTrip) {
  OnnxBuilder b = small_mlp();
  b.model().nodes[1].attributes.push_back(attr_float("alpha", 0.1));
  b.model().nodes[1].attributes.push_back(attr_string("note", "text"));
  b.model().nodes[1].attributes.push_back(attr_ints("list", {3, -4}));
  const io::OnnxModel m = io::parse_onnx_model(b.bytes(), "rt.onnx");
  const io::OnnxModel& want = b.model();
  EXPECT_EQ(m.opset, want.opset);
  EXPECT_EQ(m.ir_version, want.ir_version);
  ASSERT_EQ(m.initializers.size(), want.initializers.size());
  for (size_t i = 0; i < m.initializers.size(); ++i) {
    EXPECT_EQ(m.initializers[i].name, want.initializers[i].name);
    EXPECT_EQ(m.initializers[i].dims, want.initializers[i].dims);
    EXPECT_EQ(m.initializers[i].bytes, want.initializers[i].bytes);
  }
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].dims, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(m.nodes.size(), want.nodes.size());
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    EXPECT_EQ(m.nodes[i].name, want.nodes[i].name);
    EXPECT_EQ(m.nodes[i].op_type, want.nodes[i].op_type);
    EXPECT_EQ(m.nodes[i].inputs, want.nodes[i].inputs);
    EXPECT_EQ(m.nodes[i].outputs, want.nodes[i].outputs);
  }
  const auto& attrs = m.nodes[1].attributes;
  ASSERT_EQ(attrs.size(), 4u);
  EXPECT_EQ(attrs[0].i, 1);
  EXPECT_EQ(attrs[1].f, double(0.1f));  // stored as a float
  EXPECT_EQ(attrs[2].s, "text");
  EXPECT_EQ(attrs[3].ints, (std::vector<int64_t>{3, -4}));
}

// ---------------------------------------------------------------------------------------------
// Bad inputs: the documented error type, naming the file and the node.

TEST_F(OnnxLoader, MissingFile) {
  const std::string path = "/nonexistent/distcrown/no_such_model.onnx";
  expect_error([&] { (void)io::load_onnx(path); }, "ModelError", {path});
}

TEST_F(OnnxLoader, EmptyFile) {
  testing::TempDir dir;
  const auto path = testing::write_file(dir / "empty.onnx", "").string();
  expect_error([&] { (void)io::load_onnx(path); }, "ModelError", {path, "empty"});
  expect_error([&] { (void)io::load_onnx_bytes("", "empty.onnx"); }, "ModelError", {"empty.onnx"});
}

TEST_F(OnnxLoader, TruncatedFile) {
  const std::string bytes = small_mlp().bytes();
  testing::TempDir dir;
  for (const size_t cut : {bytes.size() / 2, bytes.size() * 9 / 10, bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    const auto path = testing::write_file(dir / "truncated.onnx", bytes.substr(0, cut)).string();
    expect_error([&] { (void)io::load_onnx(path); }, "ModelError", {path});
  }
}

TEST_F(OnnxLoader, EveryTruncationFails) {
  // Whether or not protobuf can parse a prefix, a cut model must never load.
  const std::string bytes = small_mlp().bytes();
  std::vector<size_t> loaded;  // cut points whose prefix loaded as a graph
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    try {
      (void)io::load_onnx_bytes(bytes.substr(0, cut), "cut.onnx");
      loaded.push_back(cut);
    } catch (const Error&) {
    }
  }
  std::ostringstream list;
  for (size_t cut : loaded) list << " " << cut;
  EXPECT_TRUE(loaded.empty()) << "prefixes of the " << bytes.size()
                              << "-byte model that loaded as a graph (lengths):" << list.str();
}

TEST_F(OnnxLoader, GarbageBytes) {
  std::mt19937 rng(1234);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{100}, size_t{4096}}) {
    std::string junk(n, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng() & 0xff);
    SCOPED_TRACE(std::to_string(n) + " random bytes");
    expect_error([&] { (void)io::load_onnx_bytes(junk, "junk.onnx"); }, "ModelError",
                 {"junk.onnx"});
  }
  expect_error([&] { (void)io::load_onnx_bytes("{\"not\": \"onnx\"}\n", "text.onnx"); },
               "ModelError", {"text.onnx"});
}

TEST_F(OnnxLoader, UnsupportedOperator) {
  for (const std::string op : {"Hardmax", "LSTM"}) {
    OnnxBuilder b = small_mlp();
    b.model().nodes.back().outputs = {"logits"};
    b.node("probs", op, {"logits"}, {"y"});
    expect_load_error(b, "UnsupportedError", {"bad_model.onnx", "probs", op});
  }
  OnnxBuilder custom = small_mlp();
  custom.model().nodes[2].domain = "com.microsoft";
  expect_load_error(custom, "UnsupportedError", {"bad_model.onnx", "relu1", "com.microsoft"});
}

TEST_F(OnnxLoader, GemmShapeMismatch) {
  OnnxBuilder b;
  b.input("x", {1, 6}).output("y");
  b.initializer("W", randn({4, 7}));  // in-dim 7, the input has 6
  b.node("fc_wrong", "Gemm", {"x", "W"}, {"y"}, {attr_int("transB", 1)});
  expect_load_error(b, "ModelError", {"bad_model.onnx", "fc_wrong"});

  OnnxBuilder c;
  c.input("x", {1, 6}).output("y");
  c.initializer("W", randn({4, 6})).initializer("C", randn({5}));  // bias of 5 for 4 outputs
  c.node("fc_bias", "Gemm", {"x", "W", "C"}, {"y"}, {attr_int("transB", 1)});
  expect_load_error(c, "ModelError", {"bad_model.onnx", "fc_bias"});
}

TEST_F(OnnxLoader, InputNeverProduced) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.node("relu", "Relu", {"x"}, {"r"});
  b.node("add", "Add", {"r", "nowhere"}, {"y"});
  expect_load_error(b, "ModelError", {"bad_model.onnx", "add", "nowhere"});
}

TEST_F(OnnxLoader, InitializerSizeDoesNotMatchDims) {
  OnnxBuilder b = small_mlp();
  b.model().initializers[0].bytes.resize(b.model().initializers[0].bytes.size() - 4);
  expect_load_error(b, "ModelError", {"bad_model.onnx", "W1"});
}

TEST_F(OnnxLoader, TwoVariableInputs) {
  OnnxBuilder b;
  b.input("x", {1, 4}).input("z", {1, 4}).output("y");
  b.node("add", "Add", {"x", "z"}, {"y"});
  expect_load_error(b, "UnsupportedError", {"bad_model.onnx", "'x'", "'z'"});
}

TEST_F(OnnxLoader, ConstantGraphOutput) {
  OnnxBuilder b = small_mlp();
  b.model().outputs = {{"W2", true, io::kOnnxFloat, true, {3, 8}}};
  expect_load_error(b, "ModelError", {"bad_model.onnx", "W2"});

  OnnxBuilder c = small_mlp();
  c.node("k", "Constant", {}, {"k"}, {attr_tensor("value", randn({1, 3}))});
  c.model().outputs = {{"k", true, io::kOnnxFloat, true, {1, 3}}};
  expect_load_error(c, "ModelError", {"bad_model.onnx", "'k'"});
}

TEST_F(OnnxLoader, OutputNeverProduced) {
  OnnxBuilder b = small_mlp();
  b.model().outputs = {{"missing", true, io::kOnnxFloat, true, {1, 3}}};
  expect_load_error(b, "ModelError", {"bad_model.onnx", "missing"});
}

// A grouped Conv loads (tests/test_shape_ops.cpp checks its values); a group that does not
// divide the output channels is a malformed model.
TEST_F(OnnxLoader, GroupedConvolution) {
  OnnxBuilder b;
  b.input("x", {1, 4, 5, 5}).output("y");
  b.initializer("w", randn({3, 2, 3, 3}));
  b.node("gconv", "Conv", {"x", "w"}, {"y"}, {attr_int("group", 2)});
  expect_load_error(b, "ModelError", {"bad_model.onnx", "gconv", "group"});
}

// Mul and Div of two variable tensors lower to the bilinear product (Div through Reciprocal);
// their bounds are checked by tests/test_op_harness.cpp. Different ranks would move the batch
// dim under ONNX broadcasting: refused.
TEST_F(OnnxLoader, MulAndDivOfTwoVariables) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.node("relu", "Relu", {"x"}, {"r"});
  b.node("square", "Mul", {"r", "x"}, {"m"});
  b.node("exp", "Exp", {"x"}, {"e"});
  b.node("ratio", "Div", {"m", "e"}, {"y"});
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "mul_div.onnx");
  const at::Tensor x = at::randn({1, 4});
  expect_close(g.forward(x), at::relu(x) * x / at::exp(x));

  OnnxBuilder c;
  c.input("x", {1, 4}).output("y");
  c.initializer("shape", at::tensor({1, 1, 4}, at::kLong));
  c.node("reshape", "Reshape", {"x", "shape"}, {"x3"});
  c.node("product", "Mul", {"x3", "x"}, {"y"});
  expect_load_error(c, "UnsupportedError", {"product", "different ranks"});
}

// ---------------------------------------------------------------------------------------------
// The shared VNN-COMP models.

std::vector<std::filesystem::path> fixture_models() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::fixtures_dir() / "models")) {
    if (e.path().extension() == ".onnx") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Models of the cases in refs/ops/ (ViT) may need operators this library does not have yet: they
// must fail with one clean UnsupportedError naming the operators (one line, or a first line and
// one line per unsupported node), or load. The models of testing::supported_ops_cases() must load.
bool needs_other_operators(const std::filesystem::path& model) {
  const auto ops = testing::fixtures_dir() / "refs" / "ops";
  if (!std::filesystem::is_directory(ops)) return false;
  const auto& supported = testing::supported_ops_cases();
  for (const auto& e : std::filesystem::directory_iterator(ops)) {
    if (e.path().extension() != ".json") continue;
    if (std::find(supported.begin(), supported.end(), e.path().stem().string()) !=
        supported.end()) {
      continue;
    }
    const auto ref = nlohmann::json::parse(testing::read_file(e.path()));
    if (std::filesystem::path(ref.value("model", "")).filename() == model.filename()) return true;
  }
  return false;
}

TEST_F(OnnxLoader, EveryFixtureModelLoads) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto models = fixture_models();
  ASSERT_FALSE(models.empty());
  int loaded = 0;
  std::set<std::string> loaded_names;
  for (const auto& p : models) {
    SCOPED_TRACE(p.filename().string());
    if (needs_other_operators(p)) {
      try {
        (void)io::load_onnx(p.string());
      } catch (const UnsupportedError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("unsupported"), std::string::npos) << what;
        EXPECT_TRUE(testing::is_well_formed_error(what)) << what;
        for (const std::string& line : testing::listed_nodes(what)) {
          EXPECT_NE(line.find("unsupported"), std::string::npos) << line;
        }
        continue;
      }
    }
    const BoundGraph g = io::load_onnx(p.string());
    ++loaded;
    loaded_names.insert(p.filename().string());
    EXPECT_GT(g.size(), 1);
    EXPECT_EQ(g.input_shape().front(), 1);
    const at::Tensor y = g.forward(at::zeros(g.input_shape()));
    EXPECT_EQ(y.numel(), g.output_numel());
    EXPECT_TRUE(at::isfinite(y).all().item<bool>());
  }
  EXPECT_GE(loaded, 11) << "the ReLU networks of refs/*.json all load";
  for (const auto& f : testing::ops_reference_files()) {
    const auto ref = nlohmann::json::parse(testing::read_file(f));
    const std::string model = std::filesystem::path(ref.value("model", "")).filename().string();
    EXPECT_EQ(loaded_names.count(model), 1U) << model << " (" << f.filename() << ") did not load";
  }
}

TEST_F(OnnxLoader, TruncatedFixtureModelsFail) {
  DISTCROWN_REQUIRE_FIXTURES();
  for (const auto& p : fixture_models()) {
    SCOPED_TRACE(p.filename().string());
    const std::string bytes = testing::read_file(p);
    const std::string name = p.filename().string();
    expect_error([&] { (void)io::load_onnx_bytes(bytes.substr(0, bytes.size() / 2), name); },
                 "ModelError", {name});
  }
}

}  // namespace
}  // namespace distcrown
