// ONNX import of the shape operators of exported Transformers: the shape arithmetic that folds to
// constants (Shape, Gather, Unsqueeze, Concat, ConstantOfShape, Slice, Equal, Where, Expand, Range,
// Cast, integer Div) and the linear shape operators on bounded tensors (Concat with constants,
// Slice, Gather, Split, Unsqueeze/Squeeze, ReduceSum/ReduceMean), each at the opsets whose
// semantics differ; the list of every unsupported node that one load reports; and the VNN-COMP
// ViT, which now loads up to its nonlinear attention. Sampling soundness and CROWN/IBP of the new
// bounded operators are in test_op_harness.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/options.hpp"
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
using testing::attr_tensor;
using testing::OnnxBuilder;

constexpr int64_t kBatch = 3;  // forward passes run on a batch of random inputs

at::Tensor randn(const std::vector<int64_t>& shape, double scale = 0.5) {
  return at::randn(shape, at::kFloat) * scale;
}
at::Tensor int64s(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

class ShapeOps : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(11); }
  c10::NoGradGuard no_grad_;
};

BoundGraph load(const OnnxBuilder& b) { return io::load_onnx_bytes(b.bytes(), "shape.onnx"); }

// Loads the model and compares its forward pass (batch kBatch) with `reference`.
void expect_forward_matches(const OnnxBuilder& b, const std::vector<int64_t>& input_shape,
                            const std::vector<int64_t>& output_shape,
                            const std::function<at::Tensor(const at::Tensor&)>& reference) {
  const BoundGraph g = load(b);
  EXPECT_EQ(g.input_shape(), input_shape);
  EXPECT_EQ(g.output_shape(), output_shape);
  std::vector<int64_t> shape = input_shape;
  shape[0] = kBatch;
  const at::Tensor x = at::randn(shape, at::kFloat);
  const at::Tensor got = g.forward(x);
  const at::Tensor want = reference(x);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5)) << (got - want).abs().max().item<double>();
}

// The message of the UnsupportedError (or ModelError, `unsupported` false) that loading throws.
std::string load_error(const OnnxBuilder& b, bool unsupported = true) {
  try {
    (void)load(b);
  } catch (const UnsupportedError& e) {
    EXPECT_TRUE(unsupported) << "an UnsupportedError: " << e.what();
    return e.what();
  } catch (const ModelError& e) {
    EXPECT_FALSE(unsupported) << "a ModelError: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the model loaded";
  return "";
}

void expect_contains(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

// ---------------------------------------------------------------------------------------------
// Every unsupported node in one error.

TEST_F(ShapeOps, EveryUnsupportedNodeIsListedOnce) {
  // Two branches of x, each through an operator without a lowering (LSTM, Hardmax), joined by an
  // Add; then a Relu of a Transpose that moved the batch dim (a lowering that refuses such a
  // tensor), a node of a foreign domain and another LSTM after a Relu that depends on the first
  // two.
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.initializer("W1", randn({5, 4})).initializer("W2", randn({5, 4}));
  b.node("fc1", "Gemm", {"x", "W1"}, {"h1"}, {attr_int("transB", 1)});
  b.node("fc2", "Gemm", {"x", "W2"}, {"h2"}, {attr_int("transB", 1)});
  b.node("lstm1", "LSTM", {"h1"}, {"a"});
  b.node("hard", "Hardmax", {"h2"}, {"c"});
  b.node("join", "Add", {"a", "c"}, {"s"});
  b.node("moves_batch", "Transpose", {"h1"}, {"t"}, {attr_ints("perm", {1, 0})});
  b.node("unbatched_relu", "Relu", {"t"}, {"tr"});
  b.node("custom", "Relu", {"h2"}, {"u"});
  b.model().nodes.back().domain = "com.example";
  b.node("relu", "Relu", {"s"}, {"r"});
  b.node("lstm2", "LSTM", {"r"}, {"y"});
  const std::string what = load_error(b);
  EXPECT_TRUE(testing::is_well_formed_error(what)) << what;
  const std::vector<std::string> lines = testing::lines_of(what);
  ASSERT_EQ(lines.size(), 6u) << what;
  EXPECT_EQ(lines[0],
            "shape.onnx: unsupported: 5 nodes cannot be lowered (2 later nodes that depend on them "
            "were checked by op type only):");
  EXPECT_EQ(lines[1], "  node 'lstm1' (LSTM): unsupported operator LSTM");
  EXPECT_EQ(lines[2], "  node 'hard' (Hardmax): unsupported operator Hardmax");
  EXPECT_EQ(lines[3].rfind("  node 'unbatched_relu' (Relu): unsupported: Relu of a tensor without "
                           "a batch dimension",
                           0),
            0u)
      << lines[3];
  EXPECT_EQ(lines[4], "  node 'custom' (Relu): unsupported: operator domain 'com.example'");
  EXPECT_EQ(lines[5], "  node 'lstm2' (LSTM): unsupported operator LSTM");
}

TEST_F(ShapeOps, OneUnsupportedNodeIsOneLine) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.node("hard", "Hardmax", {"x"}, {"h"});
  b.node("relu", "Relu", {"h"}, {"y"});
  const std::string what = load_error(b);
  EXPECT_EQ(what,
            "shape.onnx: node 'hard' (Hardmax): unsupported operator Hardmax (1 later node that "
            "depends on it was checked by op type only)");
}

TEST_F(ShapeOps, AMalformedNodeIsStillReportedAlone) {
  // An unsupported node first, then a Gemm whose weight does not fit: the ModelError wins.
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.initializer("W", randn({3, 5}));
  b.node("hard", "Hardmax", {"x"}, {"h"});
  b.node("bad_fc", "Gemm", {"x", "W"}, {"y"}, {attr_int("transB", 1)});
  const std::string what = load_error(b, false);
  expect_contains(what, "node 'bad_fc'");
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

// ---------------------------------------------------------------------------------------------
// Folding at import.

TEST_F(ShapeOps, VitStyleClassTokenAndPoolingFoldAndLoad) {
  // The ViT's export at opset 9 on a small scale: a "patch embedding" [1, 3, 2, 2] reshaped to
  // Shape[0:2] ++ [-1] = [1, 3, 4] (Slice with attributes), transposed to tokens [1, 4, 3]; a class
  // token ConstantOfShape(Unsqueeze(Gather(Shape(x), 0)) ++ [1] ++ [3]) + cls; Concat on the
  // tokens, + positions, BatchNorm on the features (between Transposes), MatMul, ReduceMean over
  // the tokens, Gemm.
  const at::Tensor cls = randn({3}), pos = randn({5, 3}), W = randn({3, 4}), G = randn({2, 4});
  const at::Tensor gamma = randn({3}) + 1, beta = randn({3}), mean = randn({3});
  const at::Tensor var = at::rand({3}) + 0.5;
  OnnxBuilder b;
  b.model().opset = 9;
  b.input("x", {-1, 3, 2, 2}).output("y", {-1, 2});
  b.initializer("cls", cls).initializer("pos", pos).initializer("W", W).initializer("G", G);
  b.initializer("gamma", gamma).initializer("beta", beta).initializer("mean", mean);
  b.initializer("var", var);
  b.node("shape", "Shape", {"x"}, {"s"});
  b.node("zero", "Constant", {}, {"zero"}, {attr_tensor("value", int64s({0}).reshape({}))});
  b.node("batch", "Gather", {"s", "zero"}, {"n"}, {attr_int("axis", 0)});
  b.node("lead", "Slice", {"s"}, {"lead"},
         {attr_ints("starts", {0}), attr_ints("ends", {2}), attr_ints("axes", {0})});
  b.node("minus1", "Constant", {}, {"minus1"}, {attr_tensor("value", int64s({-1}))});
  b.node("target", "Concat", {"lead", "minus1"}, {"target"}, {attr_int("axis", 0)});
  b.node("flat", "Reshape", {"x", "target"}, {"f"});
  b.node("tokens", "Transpose", {"f"}, {"tok"}, {attr_ints("perm", {0, 2, 1})});
  b.node("n1", "Unsqueeze", {"n"}, {"n1"}, {attr_ints("axes", {0})});
  b.node("one", "Constant", {}, {"one"}, {attr_tensor("value", int64s({1}))});
  b.node("three", "Constant", {}, {"three"}, {attr_tensor("value", int64s({3}))});
  b.node("cls_shape", "Concat", {"n1", "one", "three"}, {"cs"}, {attr_int("axis", 0)});
  b.node("zeros", "ConstantOfShape", {"cs"}, {"z"},
         {attr_tensor("value", at::zeros({1}, at::kFloat))});
  b.node("cls_token", "Add", {"z", "cls"}, {"ct"});
  b.node("with_cls", "Concat", {"ct", "tok"}, {"wc"}, {attr_int("axis", 1)});
  b.node("positions", "Add", {"wc", "pos"}, {"p"});
  b.node("to_features", "Transpose", {"p"}, {"pt"}, {attr_ints("perm", {0, 2, 1})});
  b.node("norm", "BatchNormalization", {"pt", "gamma", "beta", "mean", "var"}, {"bn"},
         {attr_float("epsilon", 1e-5)});
  b.node("to_tokens", "Transpose", {"bn"}, {"bt"}, {attr_ints("perm", {0, 2, 1})});
  b.node("mm", "MatMul", {"bt", "W"}, {"m"});
  b.node("pool", "ReduceMean", {"m"}, {"pool"}, {attr_ints("axes", {1}), attr_int("keepdims", 0)});
  b.node("head", "Gemm", {"pool", "G"}, {"y"}, {attr_int("transB", 1)});
  const BoundGraph g = load(b);
  for (int i = 1; i < g.size(); ++i) {
    const std::string op = g.node(i).op->op_type();
    EXPECT_TRUE(op != "Shape" && op != "Gather" && op != "ConstantOfShape") << op;
  }
  expect_forward_matches(b, {1, 3, 2, 2}, {1, 2}, [&](const at::Tensor& x) {
    const int64_t B = x.size(0);
    const at::Tensor tok = x.reshape({B, 3, 4}).transpose(1, 2);
    const at::Tensor t = at::cat({cls.expand({B, 1, 3}), tok}, 1) + pos;  // [B, 5, 3]
    const at::Tensor bn = (t - mean) / at::sqrt(var + 1e-5) * gamma + beta;
    return at::linear(at::matmul(bn, W).mean(1), G);
  });
}

TEST_F(ShapeOps, ReshapeTargetsWithLeadingOneOrMinusOne) {
  // [1, 6, 4] -> Reshape [-1, 3, 8] (the batch inferred) -> Reshape [1, -1] -> [1, 24].
  OnnxBuilder b;
  b.input("x", {1, 6, 4}).output("y", {1, 24});
  b.initializer("t1", int64s({-1, 3, 8})).initializer("t2", int64s({1, -1}));
  b.node("r1", "Reshape", {"x", "t1"}, {"r"});
  b.node("r2", "Reshape", {"r", "t2"}, {"y"});
  expect_forward_matches(b, {1, 6, 4}, {1, 24}, [](const at::Tensor& x) {
    return x.reshape({x.size(0), 24});
  });
}

// A ViT block without attention, every shape operator on a bounded tensor on the way: patches
// [1, 2, 2, 2] -> tokens [1, 4, 2] (Reshape, Transpose) -> Concat a class token -> Slice off the
// last token -> Gather the tokens in another order -> BatchNorm over the features -> MLP (MatMul
// 2->6, Relu, MatMul 6->2) + residual -> Split the features [1, 1] and Concat them back swapped ->
// ReduceMean over the tokens -> Gemm 2->3.
OnnxBuilder transformer_like() {
  OnnxBuilder b;
  b.input("x", {1, 2, 2, 2}).output("y", {1, 3});
  b.initializer("target", int64s({1, 2, -1})).initializer("cls", randn({1, 1, 2}));
  b.initializer("starts", int64s({0})).initializer("ends", int64s({-1}));
  b.initializer("axes", int64s({1})).initializer("order", int64s({3, 0, 2, 1}));
  b.initializer("gamma", randn({2}) + 1).initializer("beta", randn({2}));
  b.initializer("mean", randn({2})).initializer("var", at::rand({2}) + 0.5);
  b.initializer("W1", randn({2, 6}, 1.0)).initializer("b1", randn({6}));
  b.initializer("W2", randn({6, 2}, 1.0)).initializer("lengths", int64s({1, 1}));
  b.initializer("G", randn({3, 2}, 1.0));
  b.node("flat", "Reshape", {"x", "target"}, {"f"});
  b.node("tokens", "Transpose", {"f"}, {"t"}, {attr_ints("perm", {0, 2, 1})});
  b.node("with_cls", "Concat", {"cls", "t"}, {"c"}, {attr_int("axis", 1)});
  b.node("drop_last", "Slice", {"c", "starts", "ends", "axes"}, {"s"});
  b.node("reorder", "Gather", {"s", "order"}, {"g"}, {attr_int("axis", 1)});
  b.node("to_features", "Transpose", {"g"}, {"gt"}, {attr_ints("perm", {0, 2, 1})});
  b.node("norm", "BatchNormalization", {"gt", "gamma", "beta", "mean", "var"}, {"bn"});
  b.node("to_tokens", "Transpose", {"bn"}, {"n"}, {attr_ints("perm", {0, 2, 1})});
  b.node("fc1", "MatMul", {"n", "W1"}, {"h"});
  b.node("bias1", "Add", {"b1", "h"}, {"hb"});
  b.node("relu", "Relu", {"hb"}, {"r"});
  b.node("fc2", "MatMul", {"r", "W2"}, {"o"});
  b.node("residual", "Add", {"o", "g"}, {"a"});
  b.node("split", "Split", {"a", "lengths"}, {"a0", "a1"}, {attr_int("axis", 2)});
  b.node("swap", "Concat", {"a1", "a0"}, {"sw"}, {attr_int("axis", 2)});
  b.node("pool", "ReduceMean", {"sw"}, {"p"}, {attr_ints("axes", {1}), attr_int("keepdims", 0)});
  b.node("head", "Gemm", {"p", "G"}, {"y"}, {attr_int("transB", 1)});
  return b;
}

TEST_F(ShapeOps, TransformerLikeBlockBoundsAreSound) {
  const BoundGraph g = load(transformer_like());
  ASSERT_EQ(g.output_shape(), (std::vector<int64_t>{1, 3}));
  const at::Tensor centre = at::randn({1, 2, 2, 2});
  const InputBox box{centre - 0.3, centre + 0.3};
  const at::Tensor x = centre + (at::rand({2000, 2, 2, 2}) * 2 - 1) * 0.3;
  const at::Tensor y = g.forward(at::cat({x, box.lower, box.upper}));
  const auto lo = std::get<0>(y.min(0));
  const auto hi = std::get<0>(y.max(0));
  Interval crown;
  for (const Method m : {Method::kIbp, Method::kCrown, Method::kAlphaCrown}) {
    SCOPED_TRACE(to_string(m));
    const Interval b = compute_bounds(g, box, m);
    EXPECT_TRUE((b.lower[0] <= lo + 1e-5).all().item<bool>()) << b.lower << lo;
    EXPECT_TRUE((b.upper[0] >= hi - 1e-5).all().item<bool>()) << b.upper << hi;
    if (m == Method::kCrown) crown = b;
    if (m == Method::kAlphaCrown) {  // at least as tight as CROWN
      EXPECT_TRUE((b.lower >= crown.lower - 1e-5).all().item<bool>());
      EXPECT_TRUE((b.upper <= crown.upper + 1e-5).all().item<bool>());
    }
  }
}

TEST_F(ShapeOps, IntegerDivisionTruncatesAndRangeEqualWhereExpandCastFold) {
  // c = Cast<float>(Div(int64 [7, -7], int64 2)) = [3, -3] (float division: 3.5, -3.5);
  // r = Range(0, 4, 1) = [0, 1, 2, 3]; m = Where(Equal(r, 2), 10, 1) = [1, 1, 10, 1];
  // e = Expand(m, [2, 1]) -> [2, 4]; y = x [1, 2, 4] * e + Cast<float>(Equal(r, 1)) + c[0].
  OnnxBuilder b;
  b.model().opset = 13;
  b.input("x", {1, 2, 4}).output("y", {1, 2, 4});
  b.initializer("num", int64s({7, -7})).initializer("den", int64s({2}));
  b.initializer("start", int64s({0}).reshape({})).initializer("limit", int64s({4}).reshape({}));
  b.initializer("delta", int64s({1}).reshape({})).initializer("two", int64s({2}));
  b.initializer("one", int64s({1})).initializer("ten", at::full({1}, 10.0, at::kFloat));
  b.initializer("unit", at::ones({1}, at::kFloat)).initializer("shape21", int64s({2, 1}));
  b.initializer("first", int64s({0}));
  b.node("div", "Div", {"num", "den"}, {"q"});
  b.node("castq", "Cast", {"q"}, {"qf"}, {attr_int("to", io::kOnnxFloat)});
  b.node("q0", "Gather", {"qf", "first"}, {"q0"}, {attr_int("axis", 0)});
  b.node("range", "Range", {"start", "limit", "delta"}, {"r"});
  b.node("eq2", "Equal", {"r", "two"}, {"e2"});
  b.node("where", "Where", {"e2", "ten", "unit"}, {"m"});
  b.node("expand", "Expand", {"m", "shape21"}, {"e"});
  b.node("eq1", "Equal", {"r", "one"}, {"e1"});
  b.node("cast1", "Cast", {"e1"}, {"e1f"}, {attr_int("to", io::kOnnxFloat)});
  b.node("scale", "Mul", {"x", "e"}, {"xs"});
  b.node("shift", "Add", {"xs", "e1f"}, {"xe"});
  b.node("shift2", "Add", {"xe", "q0"}, {"y"});
  expect_forward_matches(b, {1, 2, 4}, {1, 2, 4}, [&](const at::Tensor& x) {
    const at::Tensor m = at::tensor({1.0F, 1.0F, 10.0F, 1.0F});
    const at::Tensor e1 = at::tensor({0.0F, 1.0F, 0.0F, 0.0F});
    return x * m + e1 + 3.0;
  });
  // The second quotient is -3 (truncation), not -4 (floor): check it through a second graph.
  b.model().nodes[2].inputs[1] = "one";  // Gather index 1
  expect_forward_matches(b, {1, 2, 4}, {1, 2, 4}, [&](const at::Tensor& x) {
    const at::Tensor m = at::tensor({1.0F, 1.0F, 10.0F, 1.0F});
    const at::Tensor e1 = at::tensor({0.0F, 1.0F, 0.0F, 0.0F});
    return x * m + e1 - 3.0;
  });
}

TEST_F(ShapeOps, ShapeWithStartAndEnd) {
  // Opset 15: Shape(x, start=1, end=-1) of [1, 2, 3, 4] is [2, 3]; the Reshape target is
  // [1] ++ [2·3] ++ [-1] = [1, 6, 4].
  OnnxBuilder b;
  b.model().opset = 15;
  b.input("x", {1, 2, 3, 4}).output("y", {1, 6, 4});
  b.initializer("i0", int64s({0})).initializer("i1", int64s({1}));
  b.initializer("lead", int64s({1})).initializer("last", int64s({-1}));
  b.node("shape", "Shape", {"x"}, {"s"}, {attr_int("start", 1), attr_int("end", -1)});
  b.node("d0", "Gather", {"s", "i0"}, {"d0"}, {attr_int("axis", 0)});
  b.node("d1", "Gather", {"s", "i1"}, {"d1"}, {attr_int("axis", 0)});
  b.node("prod", "Mul", {"d0", "d1"}, {"p"});
  b.node("target", "Concat", {"lead", "p", "last"}, {"t"}, {attr_int("axis", 0)});
  b.node("reshape", "Reshape", {"x", "t"}, {"y"});
  expect_forward_matches(b, {1, 2, 3, 4}, {1, 6, 4}, [](const at::Tensor& x) {
    return x.reshape({x.size(0), 6, 4});
  });
}

// ---------------------------------------------------------------------------------------------
// Bounded shape operators, at the opsets whose semantics differ.

TEST_F(ShapeOps, SliceWithNegativeStartsAndSteps) {
  // Opset 13: x [1, 5, 4] -> Slice starts [-4, 0], ends [INT64_MAX, 4], axes [1, -1], steps
  // [2, 3] -> x[:, 1::2, 0::3] = [1, 2, 2]; a full batch range on axis 0 is kept.
  OnnxBuilder b;
  b.input("x", {1, 5, 4}).output("y", {1, 2, 2});
  b.initializer("starts", int64s({0, -4, 0}));
  b.initializer("ends", int64s({1, std::numeric_limits<int64_t>::max(), 4}));
  b.initializer("axes", int64s({0, 1, -1})).initializer("steps", int64s({1, 2, 3}));
  b.node("slice", "Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  expect_forward_matches(b, {1, 5, 4}, {1, 2, 2},
                         [](const at::Tensor& x) { return x.slice(1, 1, 5, 2).slice(2, 0, 4, 3); });
}

TEST_F(ShapeOps, SliceAttributesBeforeOpset10) {
  OnnxBuilder b;
  b.model().opset = 9;
  b.input("x", {1, 6}).output("y", {1, 3});
  b.node("slice", "Slice", {"x"}, {"y"},
         {attr_ints("starts", {2}), attr_ints("ends", {-1}), attr_ints("axes", {1})});
  expect_forward_matches(b, {1, 6}, {1, 3}, [](const at::Tensor& x) { return x.slice(1, 2, 5); });
  b.model().opset = 10;  // from 10 on the ranges are inputs
  expect_contains(load_error(b, false), "'slice' (Slice)");
}

TEST_F(ShapeOps, GatherWithNegativeAndMatrixIndices) {
  OnnxBuilder b;
  b.input("x", {1, 5, 3}).output("y", {1, 2, 2, 3});
  b.initializer("idx", int64s({-1, 0, 2, -1}).reshape({2, 2}));
  b.node("gather", "Gather", {"x", "idx"}, {"y"}, {attr_int("axis", -2)});
  expect_forward_matches(b, {1, 5, 3}, {1, 2, 2, 3}, [](const at::Tensor& x) {
    return x.index_select(1, int64s({4, 0, 2, 4})).reshape({x.size(0), 2, 2, 3});
  });
}

TEST_F(ShapeOps, SplitAtEachOpset) {
  // Opset 11: `split` attribute; 13: `split` input; 18: num_outputs (7 -> 3, 3, 1).
  for (const int64_t opset : {11, 13, 18}) {
    SCOPED_TRACE(opset);
    OnnxBuilder b;
    b.model().opset = opset;
    b.input("x", {1, 7}).output("y", {1, 7});
    std::vector<io::OnnxAttribute> attrs{attr_int("axis", 1)};
    std::vector<std::string> inputs{"x"};
    if (opset == 11) attrs.push_back(attr_ints("split", {3, 3, 1}));
    if (opset == 13) {
      b.initializer("lengths", int64s({3, 3, 1}));
      inputs.emplace_back("lengths");
    }
    if (opset == 18) attrs.push_back(attr_int("num_outputs", 3));
    b.node("split", "Split", inputs, {"a", "b", "c"}, attrs);
    b.node("swap", "Concat", {"c", "b", "a"}, {"y"}, {attr_int("axis", 1)});
    expect_forward_matches(b, {1, 7}, {1, 7}, [](const at::Tensor& x) {
      return at::cat({x.slice(1, 6, 7), x.slice(1, 3, 6), x.slice(1, 0, 3)}, 1);
    });
  }
}

TEST_F(ShapeOps, ReduceAxesAttributeOrInput) {
  // ReduceMean: axes an attribute up to opset 17, an input from 18 on; ReduceSum: up to 12 / 13.
  struct Case {
    const char* op;
    int64_t opset;
  };
  for (const Case c : {Case{"ReduceMean", 17}, Case{"ReduceMean", 18}, Case{"ReduceSum", 11},
                       Case{"ReduceSum", 13}}) {
    SCOPED_TRACE(std::string(c.op) + " opset " + std::to_string(c.opset));
    const bool input = c.opset >= (std::string(c.op) == "ReduceMean" ? 18 : 13);
    const bool mean = std::string(c.op) == "ReduceMean";
    OnnxBuilder b;
    b.model().opset = c.opset;
    b.input("x", {1, 2, 3, 4}).output("y", {1, 2, 1});
    std::vector<io::OnnxAttribute> attrs{attr_int("keepdims", 1)};
    std::vector<std::string> inputs{"x"};
    if (input) {
      b.initializer("axes", int64s({-1, 2}));
      inputs.emplace_back("axes");
    } else {
      attrs.push_back(attr_ints("axes", {-1, 2}));
    }
    b.node("reduce", c.op, inputs, {"r"}, attrs);
    b.node("squeeze_last", "Flatten", {"r"}, {"f"}, {attr_int("axis", 1)});
    b.initializer("target", int64s({1, 2, 1}));
    b.node("reshape", "Reshape", {"f", "target"}, {"y"});
    expect_forward_matches(b, {1, 2, 3, 4}, {1, 2, 1}, [&](const at::Tensor& x) {
      return mean ? x.mean({2, 3}, true).reshape({x.size(0), 2, 1})
                  : x.sum({2, 3}, true).reshape({x.size(0), 2, 1});
    });
  }
}

TEST_F(ShapeOps, ReduceSumWithoutAxes) {
  // No axes: every axis (the batch dim kept with keepdims), or none with noop_with_empty_axes.
  for (const int64_t noop : {0, 1}) {
    OnnxBuilder b;
    b.input("x", {1, 2, 3}).output("y");
    b.node("sum", "ReduceSum", {"x"}, {"y"}, {attr_int("noop_with_empty_axes", noop)});
    if (noop == 1) {
      expect_forward_matches(b, {1, 2, 3}, {1, 2, 3}, [](const at::Tensor& x) { return x; });
    } else {
      expect_forward_matches(b, {1, 2, 3}, {1, 1, 1}, [](const at::Tensor& x) {
        return x.sum({1, 2}, true);
      });
    }
  }
  OnnxBuilder b;  // without keepdims the batch dim would go
  b.input("x", {1, 2, 3}).output("y");
  b.node("sum", "ReduceSum", {"x"}, {"y"}, {attr_int("keepdims", 0)});
  expect_contains(load_error(b), "over the batch dimension");
}

TEST_F(ShapeOps, UnsqueezeAxesFormFollowsTheOpset) {
  OnnxBuilder b13;  // opset 13: the axes input is required
  b13.input("x", {1, 4}).output("y");
  b13.node("u", "Unsqueeze", {"x"}, {"y"}, {attr_ints("axes", {1})});
  expect_contains(load_error(b13, false), "needs its axes input");
  OnnxBuilder b11;  // opset 11: an attribute, not an input
  b11.model().opset = 11;
  b11.input("x", {1, 4}).output("y");
  b11.initializer("axes", int64s({1}));
  b11.node("u", "Unsqueeze", {"x", "axes"}, {"y"});
  expect_contains(load_error(b11, false), "attribute before opset 13");
}

// A model input whose first dimension is not a batch (nn4sys pensieve "parallel": [12, 8]) is
// read as one sample: Reshape to a leading 1 (or -1) makes it batched; MatMul by a constant and
// the output keep it unbatched ([batch, *ONNX shape]).
TEST_F(ShapeOps, AFirstInputDimensionAboveOneIsPartOfTheInput) {
  const at::Tensor w = randn({4, 2});
  {
    OnnxBuilder b;
    b.input("x", {3, 4}).output("y", {1, 6});
    b.initializer("to_batch", int64s({-1, 3, 4})).initializer("W", w);
    b.node("batch", "Reshape", {"x", "to_batch"}, {"xb"});
    b.node("mm", "MatMul", {"xb", "W"}, {"h"});
    b.node("flat", "Flatten", {"h"}, {"y"});
    expect_forward_matches(b, {1, 3, 4}, {1, 6}, [&](const at::Tensor& x) {
      return at::matmul(x, w).reshape({x.size(0), 6});
    });
  }
  {
    OnnxBuilder b;
    b.input("x", {3, 4}).output("y", {3, 2});
    b.initializer("W", w);
    b.node("mm", "MatMul", {"x", "W"}, {"y"});
    expect_forward_matches(b, {1, 3, 4}, {1, 3, 2},
                           [&](const at::Tensor& x) { return at::matmul(x, w); });
  }
}

// A Transpose that moves the batch dim (ml4acopf: [1, n] -> [n, 1], a constant's MatMul from the
// left, and back), and a Reshape of a batched tensor to a leading dim above 1.
TEST_F(ShapeOps, TransposeAndReshapeAwayFromTheBatchDimensionAndBack) {
  const at::Tensor c = randn({4, 5});
  {
    OnnxBuilder b;
    b.input("x", {1, 5}).output("y", {1, 4});
    b.initializer("C", c);
    b.node("column", "Transpose", {"x"}, {"t"}, {attr_ints("perm", {1, 0})});
    b.node("mm", "MatMul", {"C", "t"}, {"m"});
    b.node("row", "Transpose", {"m"}, {"r"}, {attr_ints("perm", {1, 0})});
    b.node("relu", "Relu", {"r"}, {"y"});
    expect_forward_matches(b, {1, 5}, {1, 4},
                           [&](const at::Tensor& x) { return at::relu(at::matmul(x, c.t())); });
  }
  {
    const at::Tensor w = randn({3, 2});
    OnnxBuilder b;
    b.input("x", {1, 6}).output("y", {1, 4});
    b.initializer("rows", int64s({2, 3})).initializer("W", w).initializer("flat", int64s({1, 4}));
    b.node("rows", "Reshape", {"x", "rows"}, {"r"});
    b.node("mm", "MatMul", {"r", "W"}, {"m"});
    b.node("flat", "Reshape", {"m", "flat"}, {"y"});
    expect_forward_matches(b, {1, 6}, {1, 4}, [&](const at::Tensor& x) {
      return at::matmul(x.reshape({x.size(0), 2, 3}), w).reshape({x.size(0), 4});
    });
  }
}

TEST_F(ShapeOps, BatchAxisAndVariablePositionsAreRefused) {
  struct Case {
    std::string what;
    std::function<void(OnnxBuilder&)> build;
  };
  const std::vector<Case> cases{
      {"Concat along the batch dimension",
       [](OnnxBuilder& b) {
         b.node("op", "Concat", {"x", "x"}, {"y"}, {attr_int("axis", 0)});
       }},
      {"Gather along the batch dimension",
       [](OnnxBuilder& b) {
         b.initializer("i", int64s({0}));
         b.node("op", "Gather", {"x", "i"}, {"y"}, {attr_int("axis", 0)});
       }},
      {"Slice of the batch dimension",
       [](OnnxBuilder& b) {
         b.initializer("s", int64s({1})).initializer("e", int64s({2}));
         b.initializer("a", int64s({0}));
         b.node("op", "Slice", {"x", "s", "e", "a"}, {"y"});
       }},
      {"indices that depend on the perturbed input",
       [](OnnxBuilder& b) {
         b.initializer("data", randn({4, 4}));
         b.node("op", "Gather", {"data", "x"}, {"y"});
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxBuilder b;
    b.input("x", {1, 4}).output("y");
    c.build(b);
    const std::string what = load_error(b);
    expect_contains(what, "node 'op'");
    expect_contains(what, c.what);
  }
}

// ---------------------------------------------------------------------------------------------
// Min, Max, Clip (lowered through ReLU on bounded tensors), ArgMax and ScatterND (folded), and
// grouped Conv (bounded as a block-diagonal dense one).

TEST_F(ShapeOps, MinMaxClipLowerToTheirOwnFunctions) {
  // y = Clip(Max(x, c, 2x) - Min(x, 0.1), -0.5, 0.7) for x [1, 2, 3], c [3] (broadcast).
  const at::Tensor c = at::tensor({-0.2F, 0.0F, 0.3F});
  OnnxBuilder b;
  b.model().opset = 13;
  b.input("x", {1, 2, 3}).output("y", {1, 2, 3});
  b.initializer("c", c).initializer("two", at::tensor({2.0F}));
  b.initializer("tenth", at::tensor(0.1F)).initializer("lo", at::tensor(-0.5F));
  b.initializer("hi", at::tensor(0.7F));
  b.node("twice", "Mul", {"x", "two"}, {"x2"});
  b.node("max", "Max", {"x", "c", "x2"}, {"m"});
  b.node("min", "Min", {"x", "tenth"}, {"n"});
  b.node("diff", "Sub", {"m", "n"}, {"d"});
  b.node("clip", "Clip", {"d", "lo", "hi"}, {"y"});
  expect_forward_matches(b, {1, 2, 3}, {1, 2, 3}, [&](const at::Tensor& x) {
    const at::Tensor m = at::maximum(at::maximum(x, c), 2 * x);
    return at::clamp(m - at::minimum(x, at::tensor(0.1F)), -0.5, 0.7);
  });
}

TEST_F(ShapeOps, ArgMaxAndScatterNDFoldOnConstants) {
  // k = ArgMax(s, axis 1, keepdims 0) = [2, 0] (ties: the first; with select_last_index, the
  // last: [2, 3]); p = ScatterND(zeros [2, 4], [[0, 1], [1, k0]], [5, 7]);
  // y = x [1, 2, 4] + p, then Gather(y, k, axis 2).
  const at::Tensor s = at::tensor({1.0F, 2.0F, 3.0F, 0.0F, 4.0F, 1.0F, 1.0F, 4.0F}).reshape({2, 4});
  for (const bool last : {false, true}) {
    OnnxBuilder b;
    b.model().opset = 13;
    b.input("x", {1, 2, 4}).output("y", {1, 2, 2});
    b.initializer("s", s).initializer("zeros", at::zeros({2, 4}, at::kFloat));
    b.initializer("upd", at::tensor({5.0F, 7.0F}));
    b.initializer("rows", int64s({0, 1}).reshape({2, 1}));
    b.node("argmax", "ArgMax", {"s"}, {"k"},
           {attr_int("axis", 1), attr_int("keepdims", 0), attr_int("select_last_index", last)});
    b.node("col", "Unsqueeze", {"k", "axis1"}, {"kc"});
    b.initializer("axis1", int64s({1}));
    b.node("pos", "Concat", {"rows", "kc"}, {"idx"}, {attr_int("axis", 1)});
    b.node("scatter", "ScatterND", {"zeros", "idx", "upd"}, {"p"});
    b.node("add", "Add", {"x", "p"}, {"xp"});
    b.node("gather", "Gather", {"xp", "k"}, {"y"}, {attr_int("axis", 2)});
    const std::vector<int64_t> k = last ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2, 0};
    expect_forward_matches(b, {1, 2, 4}, {1, 2, 2}, [&](const at::Tensor& x) {
      at::Tensor p = at::zeros({2, 4}, at::kFloat);
      p[0][k[0]] = 5.0F;
      p[1][k[1]] = 7.0F;
      return (x + p).index_select(2, int64s(k));
    });
  }
}

TEST_F(ShapeOps, ArgMaxOfABoundedTensorIsRefused) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1});
  b.node("argmax", "ArgMax", {"x"}, {"y"}, {attr_int("axis", 1), attr_int("keepdims", 0)});
  expect_contains(load_error(b), "ArgMax of a variable tensor");
}

TEST_F(ShapeOps, GroupedConvIsTheGroupsConvolution) {
  for (const int64_t groups : {2, 4}) {
    const at::Tensor w = randn({4, 4 / groups, 3, 3});
    const at::Tensor bias = randn({4});
    OnnxBuilder b;
    b.input("x", {1, 4, 5, 5}).output("y", {1, 4, 3, 3});
    b.initializer("w", w).initializer("b", bias);
    b.node(
        "conv", "Conv", {"x", "w", "b"}, {"y"},
        {attr_int("group", groups), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})});
    expect_forward_matches(b, {1, 4, 5, 5}, {1, 4, 3, 3}, [&](const at::Tensor& x) {
      return at::conv2d(x, w, bias, {2, 2}, {1, 1}, {1, 1}, groups);
    });
  }
}

}  // namespace
}  // namespace distcrown
