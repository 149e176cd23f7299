// The operator kit (docs/architecture.md, "Adding an operator"): the registry refuses a second
// registration and knows each lowering's opset range, operators declare their capabilities
// (OpTraits), a monotone elementwise operator (Sign) is one file on the MonotoneElementwise kit,
// and a float64 model keeps its float64 parameters.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <string>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/util/error.hpp"
#include "graph/op_registry.hpp"
#include "onnx_builder.hpp"
#include "ops/builtin_ops.hpp"

namespace distcrown {
namespace {

using testing::attr_int;
using testing::OnnxBuilder;

Value no_lowering(LoweringContext& /*ctx*/) { return {}; }

TEST(OpRegistry, RefusesADuplicateRegistration) {
  OpRegistry r;
  r.add("Foo", kAllOpsets, no_lowering);
  EXPECT_THROW(r.add("Foo", kAllOpsets, no_lowering), InvalidArgument);
  EXPECT_THROW(r.add("Foo", {.first = 13, .last = 13}, no_lowering), InvalidArgument);
}

TEST(OpRegistry, FindsTheLoweringOfTheModelsOpset) {
  OpRegistry r;
  r.add("Foo", {.first = 1, .last = 9}, no_lowering);
  r.add("Foo", {.first = 10}, [](LoweringContext& /*ctx*/) { return Value::of_node(7); });
  EXPECT_THROW(r.add("Bar", {.first = 5, .last = 4}, no_lowering), InvalidArgument);
  ASSERT_NE(r.find("Foo", 9), nullptr);
  ASSERT_NE(r.find("Foo", 10), nullptr);
  EXPECT_EQ(r.find("Foo", kNewestCheckedOpset + 1), nullptr);
  EXPECT_EQ(r.find("Bar", 9), nullptr);
  const std::string why = r.describe_missing("Foo", kNewestCheckedOpset + 1);
  EXPECT_NE(why.find("1-9"), std::string::npos) << why;
  EXPECT_NE(why.find("10-" + std::to_string(kNewestCheckedOpset)), std::string::npos) << why;
  EXPECT_EQ(r.describe_missing("Bar", 9), "unsupported operator Bar");
}

TEST(OpRegistry, BuiltinFamiliesRegisterEachOpOnce) {
  const OpRegistry& r = ops::builtin_ops();  // would throw on a duplicate
  for (const char* op :
       {"Gemm", "MatMul", "Relu", "LeakyRelu", "Sign", "Floor", "Ceil", "Conv", "Reshape", "Add",
        "Sub", "Mul", "Div", "Neg", "BatchNormalization", "Constant", "Slice", "Expand"}) {
    EXPECT_NE(r.find(op, 13), nullptr) << op;
  }
}

TEST(OpRegistry, AnOpsetOutsideTheRangeIsNamedInTheError) {
  OnnxBuilder b;
  b.input("x", {1, 6}).output("y");
  b.initializer("shape", at::tensor({1, 2, 3}, at::kLong));
  b.node("r", "Reshape", {"x", "shape"}, {"y"});
  b.model().opset = 4;  // Reshape took its shape as an attribute before opset 5
  try {
    (void)io::load_onnx_bytes(b.bytes(), "old.onnx");
    FAIL() << "an opset-4 Reshape loaded";
  } catch (const UnsupportedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("old.onnx: node 'r' (Reshape)"), std::string::npos) << what;
    EXPECT_NE(what.find("opsets 5-"), std::string::npos) << what;
    EXPECT_NE(what.find("opset 4"), std::string::npos) << what;
  }
}

// x [1, 4] -> Gemm(W1) -> op -> Gemm(W2) -> [1, 3].
BoundGraph sandwich(const std::string& op_type, at::ScalarType dtype = at::kFloat) {
  at::manual_seed(7);
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  if (dtype == at::kDouble) {
    b.model().inputs.back().elem_type = io::kOnnxDouble;
    b.model().outputs.back().elem_type = io::kOnnxDouble;
  }
  b.initializer("W1", at::randn({5, 4}, dtype)).initializer("b1", at::randn({5}, dtype));
  b.initializer("W2", at::randn({3, 5}, dtype)).initializer("b2", at::randn({3}, dtype));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {attr_int("transB", 1)});
  b.node("act", op_type, {"h"}, {"a"});
  b.node("fc2", "Gemm", {"a", "W2", "b2"}, {"y"}, {attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), op_type + ".onnx");
}

TEST(OperatorKit, OperatorsDeclareTheirCapabilities) {
  const BoundGraph g = sandwich("Relu");
  const OpTraits linear = g.node(1).op->traits();
  const OpTraits relu = g.node(2).op->traits();
  EXPECT_TRUE(linear.affine && linear.mixes_elements && linear.dense_matrix);
  EXPECT_FALSE(linear.needs_input_bounds || linear.splittable || linear.relaxation_params);
  EXPECT_TRUE(relu.elementwise && relu.needs_input_bounds && relu.relaxation_params &&
              relu.splittable);
  EXPECT_FALSE(relu.affine);
  EXPECT_EQ(g.node(1).op->params().size(), 2U);  // W, b: what FSDP shards
  EXPECT_TRUE(g.node(2).op->params().empty());
  const OpTraits sign = sandwich("Sign").node(2).op->traits();
  EXPECT_TRUE(sign.elementwise && sign.needs_input_bounds);
  EXPECT_FALSE(sign.splittable || sign.relaxation_params || sign.affine);
}

// Sign through the monotone kit: IBP exact per element, the constant relaxation under CROWN,
// both containing every sampled output.
TEST(OperatorKit, SignIsSoundUnderIbpAndCrown) {
  c10::NoGradGuard no_grad;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    BoundGraph g = sandwich("Sign");
    g.to_dtype(dtype);
    at::manual_seed(11);
    const at::Tensor centre = at::randn({1, 4}, dtype);
    const InputBox box{centre - 0.5, centre + 0.5};
    const at::Tensor x = box.lower + (box.upper - box.lower) * at::rand({4000, 4}, dtype);
    const at::Tensor y = g.forward(x);  // [4000, 3]
    const Interval ibp = compute_bounds(g, box, Method::kIbp);
    const Interval crown = compute_bounds(g, box, Method::kCrown);
    // Rounding: the bounds and the samples are different float sums (tests/test_soundness.cpp's
    // tolerance), and Sign puts samples exactly at the extremes.
    const double tol = dtype == at::kFloat ? 1e-5 : 1e-9;
    const at::Tensor slack = y.abs().clamp_min(1.0) * tol;
    for (const Interval* b : {&ibp, &crown}) {
      const char* which = b == &ibp ? "IBP" : "CROWN";
      EXPECT_TRUE((y >= b->lower - slack).all().item<bool>())
          << which << " " << c10::toString(dtype) << ": lower " << b->lower << " min sample "
          << std::get<0>(y.min(0));
      EXPECT_TRUE((y <= b->upper + slack).all().item<bool>())
          << which << " " << c10::toString(dtype) << ": upper " << b->upper << " max sample "
          << std::get<0>(y.max(0));
    }
    // Sign takes two values at least somewhere in this box: the bounds are not a point.
    EXPECT_TRUE((ibp.upper > ibp.lower).any().item<bool>());
  }
}

TEST(OperatorKit, Float64ModelsKeepTheirParameters) {
  c10::NoGradGuard no_grad;
  BoundGraph g = sandwich("Relu", at::kDouble);
  EXPECT_EQ(g.dtype(), at::kDouble);
  // The same model rounded to float32 at import (what happened before) differs from the
  // double computation; the loaded graph is the double computation exactly.
  at::manual_seed(7);
  const at::Tensor W1 = at::randn({5, 4}, at::kDouble);
  const at::Tensor b1 = at::randn({5}, at::kDouble);
  const at::Tensor W2 = at::randn({3, 5}, at::kDouble);
  const at::Tensor b2 = at::randn({3}, at::kDouble);
  const at::Tensor x = at::full({1, 4}, 0.1, at::kDouble);
  const at::Tensor expected = at::linear(at::relu(at::linear(x, W1, b1)), W2, b2);
  EXPECT_TRUE(at::equal(g.forward(x), expected));
  const at::Tensor rounded = at::linear(
      at::relu(at::linear(x, W1.to(at::kFloat).to(at::kDouble), b1.to(at::kFloat).to(at::kDouble))),
      W2.to(at::kFloat).to(at::kDouble), b2.to(at::kFloat).to(at::kDouble));
  EXPECT_FALSE(at::equal(rounded, expected));
  g.to_dtype(at::kFloat);  // --dtype float32 still rounds on request
  EXPECT_EQ(g.dtype(), at::kFloat);
  EXPECT_EQ(g.forward(x.to(at::kFloat)).scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace distcrown
