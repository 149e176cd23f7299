// One harness for every operator (ctest runs it at 1 and 2 ranks). An operator joins with one
// line in op_cases(): a name and a function that builds a small graph around it from a seeded
// generator, input -> (maybe a Linear) -> the op -> (maybe a Linear). For every case, in float32
// and in float64:
//   soundness    the outputs at 2000 uniform points of random boxes, the box's lower, upper and
//                centre corners and 64 random vertices lie inside IBP, CROWN and CROWN(kTight)
//                bounds, up to kSoundUlps·eps·max|value|
//   consistency  CROWN(kTight) lies inside IBP; where IBP is exact (an affine function of the
//                input through at most one mixing map, BoundGraph::affine_from_input) CROWN
//                equals IBP within 1e-5 relative
//   FSDP         a second copy of the graph, sharded over the world communicator, gives bitwise
//                equal IBP and CROWN bounds on every rank
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "onnx_builder.hpp"
#include "random_net.hpp"
#include "sampling.hpp"

#include "distcrown/collective/mpi.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/graph/param.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/enum_names.hpp"
#include "ops/add_sub.hpp"
#include "ops/avg_pool.hpp"
#include "ops/batchnorm.hpp"
#include "ops/bilinear.hpp"
#include "ops/concat.hpp"
#include "ops/conv.hpp"
#include "ops/conv_transpose.hpp"
#include "ops/convex.hpp"
#include "ops/linear.hpp"
#include "ops/max_pool.hpp"
#include "ops/mul_div.hpp"
#include "ops/pad.hpp"
#include "ops/power.hpp"
#include "ops/reduce.hpp"
#include "ops/relu.hpp"
#include "ops/reshape.hpp"
#include "ops/slice.hpp"

namespace distcrown {
namespace {

using testing::fmt;
using testing::Net;
using testing::outputs;
using testing::Rng;

constexpr int64_t kUniformSamples = 2000;
constexpr int64_t kVertexSamples = 64;
// Sample outputs may exceed a bound by this many machine epsilons times the largest magnitude
// among the outputs and the bounds (the forward pass and the bound computation round differently;
// the graphs are three layers of at most 12 neurons).
constexpr double kSoundUlps = 16;
// CROWN vs IBP where IBP is exact.
constexpr double kExactRelTol = 1e-5;

using Build = std::function<BoundGraph(Rng&)>;

// input [1, 6] -> Linear 6->8 -> op -> Linear ->4: the op sees a mixed input and its output is
// mixed again (CROWN's backward through it matters).
BoundGraph sandwich(Rng& rng, const std::function<int(Net&, int)>& op) {
  Net n({1, 6}, rng);
  const int h = op(n, n.linear(n.input(), 8));
  return n.finish(n.linear(h, 4));
}

// input [1, 6] -> op -> Linear ->4: IBP is exact when the op is affine and elementwise.
BoundGraph then_linear(Rng& rng, const std::function<int(Net&, int)>& op) {
  Net n({1, 6}, rng);
  const int h = op(n, n.input());
  return n.finish(n.linear(h, 4));
}

// A one-input elementwise operator through ONNX import (Sign, Sigmoid, Tanh have no factory
// outside the registry): x [1, 6] -> Gemm 6->8 -> op -> Gemm 8->4. `scale` widens the first
// layer so that the op's input intervals reach its saturated range.
BoundGraph elementwise_graph(Rng& rng, const std::string& op_type, double scale = 0.4,
                             std::vector<io::OnnxAttribute> attrs = {}) {
  testing::OnnxBuilder b;
  b.input("x", {1, 6}).output("y", {1, 4});
  b.initializer("W1", rng.normal({8, 6}, scale)).initializer("b1", rng.normal({8}, 0.3));
  b.initializer("W2", rng.normal({4, 8}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("op", op_type, {"h"}, {"s"}, std::move(attrs));
  b.node("fc2", "Gemm", {"s", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), op_type + ".onnx");
}

// A constant that broadcasts the variable input to a larger shape (ml4acopf's [54] against
// [1, 24, 1]): x [1, 6] -> Gemm 6->4 -> Reshape [1, 4, 1] -> `op` with a constant [5] (Expand:
// to [1, 4, 5]) -> Relu -> Reshape [1, 20] -> Gemm 20->3.
BoundGraph broadcast_constant_graph(Rng& rng, const std::string& op) {
  testing::OnnxBuilder b;
  b.input("x", {1, 6}).output("y", {1, 3});
  b.initializer("W1", rng.normal({4, 6}, 0.5)).initializer("b1", rng.normal({4}, 0.3));
  b.initializer("c", op == "Div" ? rng.signed_scale({5}) : rng.normal({5}, 0.5));
  b.initializer("W2", rng.normal({3, 20}, 0.4)).initializer("b2", rng.normal({3}, 0.3));
  b.initializer("column", at::tensor({1, 4, 1}, at::kLong));
  b.initializer("flat", at::tensor({1, 20}, at::kLong));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("to_column", "Reshape", {"h", "column"}, {"hc"});
  if (op == "Expand") {
    b.initializer("target", at::tensor({1, 4, 5}, at::kLong));
    b.node("op", "Expand", {"hc", "target"}, {"g"});
  } else {
    b.node("op", op, {"hc", "c"}, {"g"});
  }
  b.node("relu", "Relu", {"g"}, {"r"});
  b.node("to_flat", "Reshape", {"r", "flat"}, {"f"});
  b.node("fc2", "Gemm", {"f", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "broadcast.onnx");
}

// Where with a constant condition and a variable branch (the other a constant, or variable too):
// x [1, 6] -> Gemm 6->8 (and Gemm 6->8 for a second variable branch) -> Where(cond [8]) -> Relu
// -> Gemm 8->4.
BoundGraph where_graph(Rng& rng, bool both_variable) {
  testing::OnnxBuilder b;
  b.input("x", {1, 6}).output("y", {1, 4});
  b.initializer("W1", rng.normal({8, 6}, 0.5)).initializer("b1", rng.normal({8}, 0.3));
  b.initializer("W3", rng.normal({8, 6}, 0.5)).initializer("b3", rng.normal({8}, 0.3));
  b.initializer("pick", (rng.uniform({8}) < 0.5).to(at::kLong))
      .initializer("other", rng.normal({8}, 0.5));
  b.initializer("one", at::tensor({1}, at::kLong));
  b.node("cond", "Equal", {"pick", "one"}, {"cond"});  // a bool tensor (initializers are not)
  b.initializer("W2", rng.normal({4, 8}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("fc3", "Gemm", {"x", "W3", "b3"}, {"h3"}, {testing::attr_int("transB", 1)});
  b.node("where", "Where", {"cond", both_variable ? "h3" : "other", "h"}, {"w"});
  b.node("relu", "Relu", {"w"}, {"r"});
  b.node("fc2", "Gemm", {"r", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "where.onnx");
}

// Resize or Upsample through import: x [1, 2, 3, 3] -> `op` (opset 13 Resize with `attrs`, or
// opset 9 Upsample) by scales (1, 1, 2, 1.5 for linear; 2, 2 for nearest) -> Flatten.
BoundGraph resize_graph(const std::string& op, const std::string& mode,
                        std::vector<io::OnnxAttribute> attrs = {}) {
  testing::OnnxBuilder b;
  b.model().opset = op == "Upsample" ? 9 : 13;
  b.input("x", {1, 2, 3, 3}).output("y");
  const std::vector<float> scales =
      mode == "linear" ? std::vector<float>{1, 1, 2, 1.5} : std::vector<float>{1, 1, 2, 2};
  b.initializer("scales", at::tensor(scales));
  attrs.push_back(testing::attr_string("mode", mode));
  const std::vector<std::string> inputs = op == "Upsample"
                                              ? std::vector<std::string>{"x", "scales"}
                                              : std::vector<std::string>{"x", "", "scales"};
  b.node("resize", op, inputs, {"r"}, std::move(attrs));
  b.node("flat", "Flatten", {"r"}, {"y"});
  return io::load_onnx_bytes(b.bytes(), "resize.onnx");
}

// Tensors without a batch dim through import: x [3, 4] (its first dim part of the input) ->
// Reshape [-1, 3, 4] -> MatMul 4->5 -> Relu -> Reshape [1, 15] -> Gemm 15->2; or, `transposed`,
// ml4acopf's x [1, 6] -> Gemm 6->5 -> Transpose [5, 1] -> MatMul by C [4, 5] from the left ->
// Transpose [1, 4] -> Relu -> Gemm 4->3.
BoundGraph unbatched_graph(Rng& rng, bool transposed) {
  testing::OnnxBuilder b;
  if (transposed) {
    b.input("x", {1, 6}).output("y", {1, 3});
    b.initializer("W1", rng.normal({5, 6}, 0.5)).initializer("C", rng.normal({4, 5}, 0.5));
    b.initializer("W2", rng.normal({3, 4}, 0.5));
    b.node("fc1", "Gemm", {"x", "W1"}, {"h"}, {testing::attr_int("transB", 1)});
    b.node("column", "Transpose", {"h"}, {"t"}, {testing::attr_ints("perm", {1, 0})});
    b.node("mm", "MatMul", {"C", "t"}, {"m"});
    b.node("row", "Transpose", {"m"}, {"r"}, {testing::attr_ints("perm", {1, 0})});
  } else {
    b.input("x", {3, 4}).output("y", {1, 2});
    b.initializer("to_batch", at::tensor({-1, 3, 4}, at::kLong));
    b.initializer("flat", at::tensor({1, 15}, at::kLong));
    b.initializer("W1", rng.normal({4, 5}, 0.5)).initializer("W2", rng.normal({2, 15}, 0.5));
    b.node("batch", "Reshape", {"x", "to_batch"}, {"xb"});
    b.node("mm", "MatMul", {"xb", "W1"}, {"m"});
    b.node("to_flat", "Reshape", {"m", "flat"}, {"r"});
  }
  b.node("relu", "Relu", {"r"}, {"a"});
  b.node("fc2", "Gemm", {"a", "W2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "unbatched.onnx");
}

// A 1-D Conv through import: x [1, 2, 7] -> Conv k3 stride 2 pads 1 -> Relu -> Flatten -> Gemm.
BoundGraph conv1d_graph(Rng& rng) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2, 7}).output("y", {1, 3});
  b.initializer("w", rng.normal({3, 2, 3}, 0.5)).initializer("b", rng.normal({3}, 0.3));
  b.initializer("W2", rng.normal({3, 12}, 0.4));
  b.node("conv", "Conv", {"x", "w", "b"}, {"c"},
         {testing::attr_ints("strides", {2}), testing::attr_ints("pads", {1, 1})});
  b.node("relu", "Relu", {"c"}, {"r"});
  b.node("flat", "Flatten", {"r"}, {"f"});
  b.node("fc", "Gemm", {"f", "W2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "conv1d.onnx");
}

// Min / Max / Clip through import, lowered through ReLU: x [1, 6] -> Gemm 6->8 (h) and Gemm 6->8
// (h3) -> `op` -> Gemm 8->4. "Max"/"Min": of h, h3 and a constant [8] (variadic, both kinds of
// operand); "MinConstant": of h and a constant; "Clip": opset 13 with min and max inputs;
// "ClipAttributes": opset 9, min and max attributes; "ClipMinOnly": opset 13, max absent.
BoundGraph min_max_graph(Rng& rng, const std::string& variant) {
  testing::OnnxBuilder b;
  if (variant == "ClipAttributes") b.model().opset = 9;
  b.input("x", {1, 6}).output("y", {1, 4});
  b.initializer("W1", rng.normal({8, 6}, 0.5)).initializer("b1", rng.normal({8}, 0.3));
  b.initializer("W3", rng.normal({8, 6}, 0.5)).initializer("b3", rng.normal({8}, 0.3));
  b.initializer("c", rng.normal({8}, 0.5));
  b.initializer("lo", at::tensor(-0.3f)).initializer("hi", at::tensor(0.4f));
  b.initializer("W2", rng.normal({4, 8}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("fc3", "Gemm", {"x", "W3", "b3"}, {"h3"}, {testing::attr_int("transB", 1)});
  if (variant == "Max" || variant == "Min") {
    b.node("pick", variant, {"h", "h3", "c"}, {"m"});
  } else if (variant == "MinConstant") {
    b.node("pick", "Min", {"c", "h"}, {"m"});
  } else if (variant == "Clip") {
    b.node("pick", "Clip", {"h", "lo", "hi"}, {"m"});
  } else if (variant == "ClipMinOnly") {
    b.node("pick", "Clip", {"h", "lo"}, {"m"});
  } else {
    b.node("pick", "Clip", {"h"}, {"m"},
           {testing::attr_float("min", -0.3), testing::attr_float("max", 0.4)});
  }
  b.node("fc2", "Gemm", {"m", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "min_max.onnx");
}

// MatMul by a 1-D constant (ml4acopf_2024's piecewise-linear Sigmoid): x [1, 6] -> Gemm 6->8 ->
// Reshape [1, 2, 4] -> Relu -> MatMul v [4] -> [1, 2] -> Gemm 2->3.
BoundGraph matmul_vector_graph(Rng& rng) {
  testing::OnnxBuilder b;
  b.input("x", {1, 6}).output("y", {1, 3});
  b.initializer("W1", rng.normal({8, 6}, 0.5)).initializer("b1", rng.normal({8}, 0.3));
  b.initializer("shape", at::tensor({1, 2, 4}, at::kLong)).initializer("v", rng.normal({4}, 0.5));
  b.initializer("W2", rng.normal({3, 2}, 0.4));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("rows", "Reshape", {"h", "shape"}, {"hr"});
  b.node("relu", "Relu", {"hr"}, {"r"});
  b.node("dot", "MatMul", {"r", "v"}, {"d"});
  b.node("fc2", "Gemm", {"d", "W2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "matmul_vector.onnx");
}

// ScatterND of a bounded tensor with constant indices and updates (a masked copy), mixed once
// (exact IBP): x [1, 6] -> ScatterND(indices [[0, 2], [0, 5]], updates [2]) -> Gemm 6->3.
BoundGraph scatter_graph(Rng& rng, const std::string& reduction) {
  testing::OnnxBuilder b;
  b.model().opset = 16;
  b.input("x", {1, 6}).output("y", {1, 3});
  b.initializer("idx", at::tensor({0, 2, 0, 5}, at::kLong).reshape({2, 2}));
  b.initializer("upd", rng.normal({2}, 0.5));
  b.initializer("W2", rng.normal({3, 6}, 0.4));
  b.node("scatter", "ScatterND", {"x", "idx", "upd"}, {"s"},
         {testing::attr_string("reduction", reduction)});
  b.node("fc2", "Gemm", {"s", "W2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "scatter.onnx");
}

// A grouped Conv (bounded as the block-diagonal dense one), mixed once: x [1, 4, 5, 5] -> Conv
// group 2, 3x3, pad 1, 4 -> 6 channels -> Flatten [1, 150]; `depthwise`: group 4, 4 -> 4.
BoundGraph grouped_conv_graph(Rng& rng, bool depthwise) {
  testing::OnnxBuilder b;
  const int64_t groups = depthwise ? 4 : 2;
  const int64_t out = depthwise ? 4 : 6;
  b.input("x", {1, 4, 5, 5}).output("y", {1, out * 25});
  b.initializer("w", rng.normal({out, 4 / groups, 3, 3}, 0.4));
  b.initializer("b", rng.normal({out}, 0.3));
  b.node("conv", "Conv", {"x", "w", "b"}, {"c"},
         {testing::attr_int("group", groups), testing::attr_ints("pads", {1, 1, 1, 1})});
  b.node("flat", "Flatten", {"c"}, {"y"});
  return io::load_onnx_bytes(b.bytes(), "grouped_conv.onnx");
}

// Split through ONNX import (its bounded lowering is one Slice per output):
// x [1, 2, 6] -> Split axis 2 into [2, 4] -> MatMul [2, 3] and MatMul [4, 3] -> Add -> [1, 2, 3].
BoundGraph split_graph(Rng& rng) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2, 6}).output("y", {1, 2, 3});
  b.initializer("lengths", at::tensor({2, 4}, at::kLong));
  b.initializer("W0", rng.normal({2, 3}, 0.5)).initializer("W1", rng.normal({4, 3}, 0.5));
  b.node("split", "Split", {"x", "lengths"}, {"s0", "s1"}, {testing::attr_int("axis", 2)});
  b.node("mm0", "MatMul", {"s0", "W0"}, {"h0"});
  b.node("mm1", "MatMul", {"s1", "W1"}, {"h1"});
  b.node("add", "Add", {"h0", "h1"}, {"y"});
  return io::load_onnx_bytes(b.bytes(), "split.onnx");
}

// Unsqueeze (opset 13: axes an input) and Squeeze (opset 11: axes an attribute) through import:
// x [1, 3, 4] -> Unsqueeze axes [2] -> [1, 3, 1, 4] -> MatMul [4, 2] -> Squeeze axes [2] ->
// [1, 3, 2].
BoundGraph unsqueeze_squeeze_graph(Rng& rng, int64_t opset) {
  testing::OnnxBuilder b;
  b.model().opset = opset;
  b.input("x", {1, 3, 4}).output("y", {1, 3, 2});
  b.initializer("W", rng.normal({4, 2}, 0.5));
  if (opset >= 13) {
    b.initializer("axes", at::tensor({2}, at::kLong));
    b.node("unsqueeze", "Unsqueeze", {"x", "axes"}, {"u"});
    b.node("mm", "MatMul", {"u", "W"}, {"h"});
    b.node("squeeze", "Squeeze", {"h", "axes"}, {"y"});
  } else {
    b.node("unsqueeze", "Unsqueeze", {"x"}, {"u"}, {testing::attr_ints("axes", {2})});
    b.node("mm", "MatMul", {"u", "W"}, {"h"});
    b.node("squeeze", "Squeeze", {"h"}, {"y"}, {testing::attr_ints("axes", {-2})});
  }
  return io::load_onnx_bytes(b.bytes(), "unsqueeze.onnx");
}

// Softmax through import (its lowering: shift by the row's maximum at the bounds' midpoint, Exp,
// ReduceSum, Reciprocal, product): x [1, 6] -> Gemm 6->24 -> Reshape [1, 2, 3, 4] -> Softmax
// (`axis`; opset 11 groups the dims from axis on) -> Reshape [1, 24] -> Gemm 24->4. With `ties`
// the scores of each row along the last axis are equal (repeated weight rows): the maximum is
// tied everywhere.
BoundGraph softmax_graph(Rng& rng, int64_t opset, int64_t axis, double scale, bool ties = false) {
  testing::OnnxBuilder b;
  b.model().opset = opset;
  b.input("x", {1, 6}).output("y", {1, 4});
  const at::Tensor w1 =
      ties ? rng.normal({6, 6}, scale).repeat_interleave(4, 0) : rng.normal({24, 6}, scale);
  b.initializer("W1", w1).initializer("b1", ties ? at::zeros({24}) : rng.normal({24}, 0.3));
  b.initializer("W2", rng.normal({4, 24}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.initializer("grid", at::tensor({1, 2, 3, 4}, at::kLong));
  b.initializer("flat", at::tensor({1, 24}, at::kLong));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("to_grid", "Reshape", {"h", "grid"}, {"g"});
  b.node("softmax", "Softmax", {"g"}, {"p"}, {testing::attr_int("axis", axis)});
  b.node("to_flat", "Reshape", {"p", "flat"}, {"f"});
  b.node("fc2", "Gemm", {"f", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "softmax.onnx");
}

// LayerNormalization through import: x [1, 6] -> Gemm 6->24 -> Reshape [1, 2, 3, 4] -> layer norm
// over the dims from `axis` on (scale, bias of those dims) -> Reshape [1, 24] -> Gemm 24->4. The
// opset-17 op (its lowering: mean, x − mean, square, mean, + ε, √, 1/·, product, scale and bias),
// or with `decomposed` the nodes torch.onnx emits before opset 17 (ReduceMean, Sub, Pow,
// ReduceMean, Add, Sqrt, Div, Mul, Add), opset 13. `scale` is the first layer's weight scale.
BoundGraph layer_norm_graph(Rng& rng, bool decomposed, int64_t axis, double scale) {
  testing::OnnxBuilder b;
  b.model().opset = decomposed ? 13 : 17;
  b.input("x", {1, 6}).output("y", {1, 4});
  const std::vector<int64_t> grid{1, 2, 3, 4};
  const std::vector<int64_t> normalised(grid.begin() + axis, grid.end());
  b.initializer("W1", rng.normal({24, 6}, scale)).initializer("b1", rng.normal({24}, 0.3));
  b.initializer("W2", rng.normal({4, 24}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.initializer("grid", at::tensor(grid, at::kLong));
  b.initializer("flat", at::tensor({1, 24}, at::kLong));
  b.initializer("gamma", rng.normal(normalised, 1.0))
      .initializer("beta", rng.normal(normalised, 0.3));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  b.node("to_grid", "Reshape", {"h", "grid"}, {"g"});
  if (decomposed) {
    std::vector<int64_t> axes;
    for (int64_t d = axis; d < 4; ++d) axes.push_back(d);
    b.initializer("two", at::tensor(2.0F)).initializer("eps", at::tensor(1e-5F));
    b.node("mean", "ReduceMean", {"g"}, {"m"}, {testing::attr_ints("axes", axes)});
    b.node("centre", "Sub", {"g", "m"}, {"c"});
    b.node("square", "Pow", {"c", "two"}, {"sq"});
    b.node("var", "ReduceMean", {"sq"}, {"v"}, {testing::attr_ints("axes", axes)});
    b.node("plus_eps", "Add", {"v", "eps"}, {"ve"});
    b.node("std", "Sqrt", {"ve"}, {"s"});
    b.node("divide", "Div", {"c", "s"}, {"n"});
    b.node("scale", "Mul", {"n", "gamma"}, {"ns"});
    b.node("shift", "Add", {"ns", "beta"}, {"p"});
  } else {
    b.node("ln", "LayerNormalization", {"g", "gamma", "beta"}, {"p"},
           {testing::attr_int("axis", axis), testing::attr_float("epsilon", 1e-5)});
  }
  b.node("to_flat", "Reshape", {"p", "flat"}, {"f"});
  b.node("fc2", "Gemm", {"f", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "layer_norm.onnx");
}

// Gelu through import: x [1, 6] -> Gemm 6->8 -> Gelu -> Gemm 8->4. `approximate` "none" or "tanh"
// (opset 20), or "decomposed": x · 0.5 · (1 + Erf(x / √2)) as exported before opset 20 (fused
// into one Gelu node at load, io/onnx_gelu_fusion.hpp), or "unfused": the same with an Identity
// after Erf, which keeps its nodes (Erf, then the product by McCormick).
BoundGraph gelu_graph(Rng& rng, const std::string& approximate, double scale) {
  testing::OnnxBuilder b;
  const bool unfused = approximate == "unfused";
  const bool decomposed = approximate == "decomposed" || unfused;
  b.model().opset = decomposed ? 13 : 20;
  b.input("x", {1, 6}).output("y", {1, 4});
  b.initializer("W1", rng.normal({8, 6}, scale)).initializer("b1", rng.normal({8}, 0.3));
  b.initializer("W2", rng.normal({4, 8}, 0.4)).initializer("b2", rng.normal({4}, 0.3));
  b.node("fc1", "Gemm", {"x", "W1", "b1"}, {"h"}, {testing::attr_int("transB", 1)});
  if (decomposed) {
    b.initializer("root2", at::tensor(1.4142135F)).initializer("one", at::tensor(1.0F));
    b.initializer("half", at::tensor(0.5F));
    b.node("div", "Div", {"h", "root2"}, {"d"});
    b.node("erf", "Erf", {"d"}, {unfused ? "e0" : "e"});
    if (unfused) b.node("id", "Identity", {"e0"}, {"e"});
    b.node("plus_one", "Add", {"e", "one"}, {"p"});
    b.node("times_x", "Mul", {"h", "p"}, {"q"});
    b.node("halve", "Mul", {"q", "half"}, {"s"});
  } else {
    b.node("gelu", "Gelu", {"h"}, {"s"}, {testing::attr_string("approximate", approximate)});
  }
  b.node("fc2", "Gemm", {"s", "W2", "b2"}, {"y"}, {testing::attr_int("transB", 1)});
  return io::load_onnx_bytes(b.bytes(), "gelu.onnx");
}

// A constant of the given shape without the batch dim, as a Concat part.
ops::ConcatPart constant_part(Rng& r, std::vector<int64_t> rest, int64_t axis) {
  const int64_t length = rest[size_t(axis - 1)];
  return {length, make_param(r.normal(rest))};
}

struct OpCase {
  std::string name;
  Build build;  // deterministic in the generator's seed: called twice for the FSDP copy
};

// gtest prints a failing case's parameter: its name, not its bytes.
[[maybe_unused]] void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// One line per operator (or configuration of one).
const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases{
      {"Linear", [](Rng& r) { return then_linear(r, [](Net&, int x) { return x; }); }},
      {"LinearNoBias",
       [](Rng& r) {
         // x [1, 6] -> Linear 6->5 without bias.
         Net n({1, 6}, r);
         const at::Tensor w = r.normal({5, 6}, 0.4);
         return n.finish(n.add(ops::make_linear(make_param(w), nullptr), {n.input()}));
       }},
      {"Conv",
       [](Rng& r) {
         // x [1, 2, 5, 5] -> Conv 3x3 stride 2 pad 1 -> [1, 3, 3, 3] -> Flatten [1, 27].
         Net n({1, 2, 5, 5}, r);
         const at::Tensor w = r.normal({3, 2, 3, 3}, 0.3);
         const int c = n.add(ops::make_conv2d(make_param(w), make_param(r.normal({3}, 0.3)),
                                              {{2, 2}, {1, 1}, {1, 1}}),
                             {n.input()});
         return n.finish(n.flatten(c));
       }},
      {"ConvRelu",
       [](Rng& r) {
         // x [1, 2, 5, 5] -> Conv 3x3 pad 1 -> [1, 2, 5, 5] -> Relu -> Flatten -> Linear 50->3.
         Net n({1, 2, 5, 5}, r);
         const at::Tensor w = r.normal({2, 2, 3, 3}, 0.3);
         const int c = n.add(ops::make_conv2d(make_param(w), make_param(r.normal({2}, 0.3)),
                                              {{1, 1}, {1, 1}, {1, 1}}),
                             {n.input()});
         const int h = n.add(ops::make_relu(), {c});
         return n.finish(n.linear(n.flatten(h), 3));
       }},
      {"ConvTranspose",
       [](Rng& r) {
         // x [1, 2, 3, 3] -> ConvTranspose 3x3 stride 2 pads 1 output_padding 1 -> [1, 3, 6, 6]
         // -> Flatten [1, 108].
         Net n({1, 2, 3, 3}, r);
         const int c = n.add(ops::make_conv_transpose2d(make_param(r.normal({2, 3, 3, 3}, 0.3)),
                                                        make_param(r.normal({3}, 0.3)),
                                                        {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}),
                             {n.input()});
         return n.finish(n.flatten(c));
       }},
      {"ConvTransposeAsymmetricRelu",
       [](Rng& r) {
         // x [1, 2, 3, 3] -> ConvTranspose 3x2 stride (2, 1) pads (0, 1, 1, 0) dilation 2 ->
         // Relu -> Flatten -> Linear ->3.
         Net n({1, 2, 3, 3}, r);
         const int c = n.add(ops::make_conv_transpose2d(make_param(r.normal({2, 2, 3, 2}, 0.3)),
                                                        make_param(r.normal({2}, 0.3)),
                                                        {{2, 1}, {0, 1}, {1, 0}, {0, 0}, {2, 2}}),
                             {n.input()});
         const int h = n.add(ops::make_relu(), {c});
         return n.finish(n.linear(n.flatten(h), 3));
       }},
      {"ResizeNearest", [](Rng&) { return resize_graph("Resize", "nearest"); }},
      {"ResizeLinearAlignCorners",
       [](Rng&) {
         return resize_graph(
             "Resize", "linear",
             {testing::attr_string("coordinate_transformation_mode", "align_corners")});
       }},
      {"UpsampleNearest", [](Rng&) { return resize_graph("Upsample", "nearest"); }},
      {"UnbatchedInput", [](Rng& r) { return unbatched_graph(r, false); }},
      {"TransposeOfTheBatchDimension", [](Rng& r) { return unbatched_graph(r, true); }},
      {"Conv1dRelu", [](Rng& r) { return conv1d_graph(r); }},
      {"BatchNorm",
       [](Rng& r) {
         // x [1, 3, 2, 2] -> BatchNorm (w, b [3, 1, 1], some w < 0) -> Flatten -> Linear 12->4.
         Net n({1, 3, 2, 2}, r);
         const int bn = n.add(ops::make_batchnorm(make_param(r.signed_scale({3, 1, 1})),
                                                  make_param(r.normal({3, 1, 1}, 0.5))),
                              {n.input()});
         return n.finish(n.linear(n.flatten(bn), 4));
       }},
      {"Relu",
       [](Rng& r) {
         return sandwich(r, [](Net& n, int x) { return n.add(ops::make_relu(), {x}); });
       }},
      {"Sign", [](Rng& r) { return elementwise_graph(r, "Sign"); }},
      {"Floor", [](Rng& r) { return elementwise_graph(r, "Floor", 3.0); }},
      {"Ceil", [](Rng& r) { return elementwise_graph(r, "Ceil", 3.0); }},
      {"AddConstantBroadcastsInput", [](Rng& r) { return broadcast_constant_graph(r, "Add"); }},
      {"SubConstantBroadcastsInput", [](Rng& r) { return broadcast_constant_graph(r, "Sub"); }},
      {"MulConstantBroadcastsInput", [](Rng& r) { return broadcast_constant_graph(r, "Mul"); }},
      {"DivConstantBroadcastsInput", [](Rng& r) { return broadcast_constant_graph(r, "Div"); }},
      {"ExpandBounded", [](Rng& r) { return broadcast_constant_graph(r, "Expand"); }},
      {"Max", [](Rng& r) { return min_max_graph(r, "Max"); }},
      {"Min", [](Rng& r) { return min_max_graph(r, "Min"); }},
      {"MinConstant", [](Rng& r) { return min_max_graph(r, "MinConstant"); }},
      {"Clip", [](Rng& r) { return min_max_graph(r, "Clip"); }},
      {"ClipMinOnly", [](Rng& r) { return min_max_graph(r, "ClipMinOnly"); }},
      {"ClipAttributes", [](Rng& r) { return min_max_graph(r, "ClipAttributes"); }},
      {"MatMulByVector", [](Rng& r) { return matmul_vector_graph(r); }},
      {"ScatterNDBounded", [](Rng& r) { return scatter_graph(r, "none"); }},
      {"ScatterNDAddBounded", [](Rng& r) { return scatter_graph(r, "add"); }},
      {"ConvGrouped", [](Rng& r) { return grouped_conv_graph(r, false); }},
      {"ConvDepthwise", [](Rng& r) { return grouped_conv_graph(r, true); }},
      {"WhereVariableAndConstant", [](Rng& r) { return where_graph(r, false); }},
      {"WhereTwoVariables", [](Rng& r) { return where_graph(r, true); }},
      {"LeakyRelu",
       [](Rng& r) {
         return elementwise_graph(r, "LeakyRelu", 0.4, {testing::attr_float("alpha", 0.1)});
       }},
      {"LeakyReluDefaultAlpha", [](Rng& r) { return elementwise_graph(r, "LeakyRelu"); }},
      {"LeakyReluSteep",
       [](Rng& r) {
         return elementwise_graph(r, "LeakyRelu", 0.4, {testing::attr_float("alpha", 2.5)});
       }},
      {"Sigmoid", [](Rng& r) { return elementwise_graph(r, "Sigmoid"); }},
      {"SigmoidSaturated", [](Rng& r) { return elementwise_graph(r, "Sigmoid", 8.0); }},
      {"Tanh", [](Rng& r) { return elementwise_graph(r, "Tanh"); }},
      {"TanhSaturated", [](Rng& r) { return elementwise_graph(r, "Tanh", 8.0); }},
      {"Exp", [](Rng& r) { return elementwise_graph(r, "Exp"); }},
      {"Erf", [](Rng& r) { return elementwise_graph(r, "Erf"); }},
      {"ErfSaturated", [](Rng& r) { return elementwise_graph(r, "Erf", 8.0); }},
      // Sin / Cos: narrow intervals (mostly monotone), intervals around extrema, and intervals
      // spanning several periods.
      {"Sin", [](Rng& r) { return elementwise_graph(r, "Sin"); }},
      {"SinAroundExtrema", [](Rng& r) { return elementwise_graph(r, "Sin", 2.0); }},
      {"SinPeriods", [](Rng& r) { return elementwise_graph(r, "Sin", 8.0); }},
      {"Cos", [](Rng& r) { return elementwise_graph(r, "Cos"); }},
      {"CosAroundExtrema", [](Rng& r) { return elementwise_graph(r, "Cos", 2.0); }},
      {"CosPeriods", [](Rng& r) { return elementwise_graph(r, "Cos", 8.0); }},
      {"Gelu", [](Rng& r) { return gelu_graph(r, "none", 0.4); }},
      {"GeluTanh", [](Rng& r) { return gelu_graph(r, "tanh", 0.4); }},
      {"GeluDecomposed", [](Rng& r) { return gelu_graph(r, "decomposed", 0.4); }},
      {"GeluDecomposedUnfused", [](Rng& r) { return gelu_graph(r, "unfused", 0.4); }},
      {"GeluWide", [](Rng& r) { return gelu_graph(r, "none", 4.0); }},
      {"Pow2",
       [](Rng& r) {
         return sandwich(r, [](Net& n, int x) { return n.add(ops::make_pow(2), {x}); });
       }},
      {"Pow3",
       [](Rng& r) {
         return sandwich(r, [](Net& n, int x) { return n.add(ops::make_pow(3), {x}); });
       }},
      {"Pow4",
       [](Rng& r) {
         return sandwich(r, [](Net& n, int x) { return n.add(ops::make_pow(4), {x}); });
       }},
      {"Sqrt",
       [](Rng& r) {
         // Positive inputs: x -> Linear 6->8 (bias shifted by 4) -> Sqrt -> Linear 8->4.
         Net n({1, 6}, r);
         const int h = n.linear(n.input(), 8, 0.3, 0.3, 4.0);
         return n.finish(n.linear(n.add(ops::make_sqrt(), {h}), 4));
       }},
      {"LayerNormLastAxis", [](Rng& r) { return layer_norm_graph(r, false, 3, 0.5); }},
      {"LayerNormTwoAxes", [](Rng& r) { return layer_norm_graph(r, false, 2, 0.5); }},
      {"LayerNormWide", [](Rng& r) { return layer_norm_graph(r, false, 3, 3.0); }},
      {"LayerNormDecomposed", [](Rng& r) { return layer_norm_graph(r, true, 3, 0.5); }},
      {"LayerNormDecomposedWide", [](Rng& r) { return layer_norm_graph(r, true, 2, 3.0); }},
      {"SoftmaxLastAxis", [](Rng& r) { return softmax_graph(r, 13, -1, 0.5); }},
      {"SoftmaxMiddleAxis", [](Rng& r) { return softmax_graph(r, 13, 2, 0.5); }},
      {"SoftmaxOpset11Grouped", [](Rng& r) { return softmax_graph(r, 11, 2, 0.5); }},
      {"SoftmaxWide", [](Rng& r) { return softmax_graph(r, 13, -1, 3.0); }},
      {"SoftmaxTiedMaximum", [](Rng& r) { return softmax_graph(r, 13, -1, 0.5, true); }},
      {"MulTwoBounded",
       [](Rng& r) {
         // x [1, 6] -> two Linear 6->8 branches -> their product -> Linear 8->4.
         Net n({1, 6}, r);
         const int a = n.linear(n.input(), 8);
         const int b = n.linear(n.input(), 8);
         return n.finish(n.linear(n.add(ops::make_bilinear_mul(), {a, b}), 4));
       }},
      {"MulTwoBoundedBroadcast",
       [](Rng& r) {
         // [1, 8] ⊙ [1, 1] (a gate): x -> Linear 6->8, x -> Linear 6->1, product -> Linear 8->4.
         Net n({1, 6}, r);
         const int a = n.linear(n.input(), 8);
         const int g = n.linear(n.input(), 1);
         return n.finish(n.linear(n.add(ops::make_bilinear_mul(), {a, g}), 4));
       }},
      {"MulSquare",
       [](Rng& r) {
         // One node times itself: x -> Linear 6->8 -> h ⊙ h -> Linear 8->4.
         Net n({1, 6}, r);
         const int a = n.linear(n.input(), 8);
         return n.finish(n.linear(n.add(ops::make_bilinear_mul(), {a, a}), 4));
       }},
      {"DivTwoBounded",
       [](Rng& r) {
         // What Div of two variable tensors lowers to: a · Reciprocal(exp(b)) (positive
         // denominators) -> Linear 8->4.
         Net n({1, 6}, r);
         const int a = n.linear(n.input(), 8);
         const int d = n.add(ops::make_exp(), {n.linear(n.input(), 8, 0.5)});
         const int q = n.add(ops::make_bilinear_mul(), {a, n.add(ops::make_reciprocal(), {d})});
         return n.finish(n.linear(q, 4));
       }},
      {"MatMulTwoBounded",
       [](Rng& r) {
         // Attention scores: x [1, 6] -> Linear 6->12 as [1, 3, 4] and Linear 6->8 as [1, 4, 2]
         // -> their product [1, 3, 2] -> Flatten -> Linear 6->4.
         Net n({1, 6}, r);
         const int q = n.add(ops::make_reshape({3, 4}), {n.linear(n.input(), 12)});
         const int k = n.add(ops::make_reshape({4, 2}), {n.linear(n.input(), 8)});
         return n.finish(n.linear(n.flatten(n.add(ops::make_bilinear_matmul(), {q, k})), 4));
       }},
      {"Add",
       [](Rng& r) {
         // Two branches of the same input: x -> Linear 6->5, x -> Linear 6->5, Add -> Linear.
         return then_linear(r, [](Net& n, int x) {
           return n.add(ops::make_add(), {n.linear(x, 5), n.linear(x, 5)});
         });
       }},
      {"Sub",
       [](Rng& r) {
         return then_linear(r, [](Net& n, int x) {
           return n.add(ops::make_sub(), {n.linear(x, 5), n.linear(x, 5)});
         });
       }},
      {"AddConst",
       [](Rng& r) {
         return then_linear(r, [](Net& n, int x) {
           return n.add(ops::make_add_const(make_param(n.like(x, false))), {x});
         });
       }},
      {"MulConst",
       [](Rng& r) {
         return then_linear(r, [](Net& n, int x) {
           return n.add(ops::make_mul_const(make_param(n.like(x, true))), {x});
         });
       }},
      {"DivConst",
       [](Rng& r) {
         return then_linear(r, [](Net& n, int x) {
           return n.add(ops::make_div_const(make_param(n.like(x, true))), {x});
         });
       }},
      {"Neg",
       [](Rng& r) {
         return then_linear(r, [](Net& n, int x) { return n.add(ops::make_neg(), {x}); });
       }},
      {"Reshape",
       [](Rng& r) {
         // [1, 6] -> Reshape [1, 2, 3] -> Linear on the last dim 3->4 -> [1, 2, 4].
         Net n({1, 6}, r);
         const int h = n.add(ops::make_reshape({2, 3}), {n.input()});
         return n.finish(n.linear(h, 4));
       }},
      {"Flatten",
       [](Rng& r) {
         // [1, 2, 3] -> Flatten [1, 6] -> Linear 6->4.
         Net n({1, 2, 3}, r);
         return n.finish(n.linear(n.flatten(n.input()), 4));
       }},
      {"Transpose",
       [](Rng& r) {
         // [1, 2, 3, 4] -> Transpose (0, 3, 1, 2) -> [1, 4, 2, 3] -> Linear on the last dim 3->2.
         Net n({1, 2, 3, 4}, r);
         const int t = n.add(ops::make_transpose({0, 3, 1, 2}), {n.input()});
         return n.finish(n.linear(t, 2));
       }},
      {"AveragePool",
       [](Rng& r) {
         // x [1, 2, 7, 7] -> AveragePool 3x3 stride 2, pads (top 1, left 0, bottom 1, right 1)
         // counted -> [1, 2, 4, 3] -> Flatten.
         Net n({1, 2, 7, 7}, r);
         const int p =
             n.add(ops::make_average_pool({{3, 3}, {2, 2}, {1, 0, 1, 1}}, true), {n.input()});
         return n.finish(n.flatten(p));
       }},
      {"AveragePoolExcludePad",
       [](Rng& r) {
         // x [1, 2, 6, 5] -> AveragePool 3x2 stride (2, 1), pads (1, 1, 2, 0), padding not
         // counted (the divisor varies per window) -> [1, 2, 4, 5] -> Flatten.
         Net n({1, 2, 6, 5}, r);
         const int p =
             n.add(ops::make_average_pool({{3, 2}, {2, 1}, {1, 1, 2, 0}}, false), {n.input()});
         return n.finish(n.flatten(p));
       }},
      {"GlobalAveragePool",
       [](Rng& r) {
         // x [1, 3, 4, 5] -> GlobalAveragePool [1, 3, 1, 1] -> Flatten.
         Net n({1, 3, 4, 5}, r);
         return n.finish(n.flatten(n.add(ops::make_global_average_pool(), {n.input()})));
       }},
      {"ConvReluPadAveragePool",
       [](Rng& r) {
         // The verivital network's shape: x [1, 1, 6, 6] -> Conv 2x2 (3 channels) -> Relu ->
         // Pad 0 -> AveragePool 2x2 stride 2 -> [1, 3, 2, 2] -> Flatten -> Linear 12->3.
         Net n({1, 1, 6, 6}, r);
         const int h = n.relu(n.conv(n.input(), 3, 2, {}));
         const int p = n.add(ops::make_pad({0, 0, 0, 0}, 0.0), {h});
         const int a = n.add(ops::make_average_pool({{2, 2}, {2, 2}, {0, 0, 0, 0}}, false), {p});
         return n.finish(n.linear(n.flatten(a), 3));
       }},
      {"Pad",
       [](Rng& r) {
         // x [1, 2, 3, 4] -> Pad value 0.7: last dim (+2, -1), dim 2 (-1, +1), dim 1 (+1, 0)
         // (negative = cropped) -> [1, 3, 3, 5] -> Flatten -> Linear 45->4.
         Net n({1, 2, 3, 4}, r);
         const int p = n.add(ops::make_pad({2, -1, -1, 1, 1, 0}, 0.7), {n.input()});
         return n.finish(n.linear(n.flatten(p), 4));
       }},
      {"MaxPool",
       [](Rng& r) {
         // x [1, 2, 6, 6] -> Conv 3x3 pad 1 -> MaxPool 2x2 stride 2 -> [1, 2, 3, 3] -> Flatten
         // -> Linear 18->3.
         Net n({1, 2, 6, 6}, r);
         const int c = n.conv(n.input(), 2, 3, {{1, 1}, {1, 1}, {1, 1}});
         const int p = n.add(ops::make_max_pool({{2, 2}, {2, 2}, {0, 0, 0, 0}}), {c});
         return n.finish(n.linear(n.flatten(p), 3));
       }},
      {"MaxPoolOverlapping",
       [](Rng& r) {
         // Overlapping windows, asymmetric padding: x [1, 2, 6, 6] -> Conv 3x3 pad 1 ->
         // MaxPool 3x3 stride 1, pads (1, 0, 1, 1) -> [1, 2, 6, 5] -> Flatten -> Linear 60->3.
         Net n({1, 2, 6, 6}, r);
         const int c = n.conv(n.input(), 2, 3, {{1, 1}, {1, 1}, {1, 1}});
         const int p = n.add(ops::make_max_pool({{3, 3}, {1, 1}, {1, 0, 1, 1}}), {c});
         return n.finish(n.linear(n.flatten(p), 3));
       }},
      {"MaxPoolStrideAboveKernel",
       [](Rng& r) {
         // x [1, 2, 7, 7] -> Conv 3x3 pad 1 -> Relu -> MaxPool 2x2 stride 3 (inputs skipped)
         // -> [1, 2, 2, 2] -> Flatten -> Linear 8->3.
         Net n({1, 2, 7, 7}, r);
         const int c = n.relu(n.conv(n.input(), 2, 3, {{1, 1}, {1, 1}, {1, 1}}));
         const int p = n.add(ops::make_max_pool({{2, 2}, {3, 3}, {0, 0, 0, 0}}), {c});
         return n.finish(n.linear(n.flatten(p), 3));
       }},
      {"TransposeBatchNormTokens",
       [](Rng& r) {
         // A ViT's norm: tokens [1, 5, 6] -> Transpose (0, 2, 1) -> BatchNorm over the 6 features
         // ([1, 6, 5], w, b [6, 1]) -> Transpose back -> Linear 6->3 on every token.
         Net n({1, 5, 6}, r);
         const int t = n.add(ops::make_transpose({0, 2, 1}), {n.input()});
         const int bn = n.batchnorm(t);
         return n.finish(n.linear(n.add(ops::make_transpose({0, 2, 1}), {bn}), 3));
       }},
      {"TransposeHeads",
       [](Rng& r) {
         // Attention heads: [1, 5, 6] -> Reshape [1, 5, 2, 3] -> Transpose (0, 2, 1, 3) and then
         // (0, 1, 3, 2) -> [1, 2, 3, 5] -> Linear on the last dim 5->2.
         Net n({1, 5, 6}, r);
         const int h = n.add(ops::make_reshape({5, 2, 3}), {n.input()});
         const int t = n.add(ops::make_transpose({0, 2, 1, 3}), {h});
         return n.finish(n.linear(n.add(ops::make_transpose({0, 1, 3, 2}), {t}), 2));
       }},
      {"LinearTokens",
       [](Rng& r) {
         // A ViT's MLP on each token: [1, 5, 6] -> Linear 6->8 -> Relu -> Linear 8->3.
         Net n({1, 5, 6}, r);
         return n.finish(n.linear(n.relu(n.linear(n.input(), 8)), 3));
       }},
      {"ConcatWithConstants",
       [](Rng& r) {
         // A class token and a constant tail around the tokens: cat(c [1, 1, 3], x [1, 2, 3],
         // c' [1, 2, 3]) on axis 1 -> [1, 5, 3] -> Linear 3->2.
         Net n({1, 2, 3}, r);
         std::vector<ops::ConcatPart> parts{
             constant_part(r, {1, 3}, 1), {2, nullptr}, constant_part(r, {2, 3}, 1)};
         return n.finish(n.linear(n.add(ops::make_concat(1, std::move(parts)), {n.input()}), 2));
       }},
      {"ConcatTwoBounded",
       [](Rng& r) {
         // x [1, 6] -> Linear 6->3 and Linear 6->4 -> cat with a constant [2] on the last axis ->
         // [1, 9] -> Linear 9->4.
         Net n({1, 6}, r);
         const int a = n.linear(n.input(), 3);
         const int b = n.linear(n.input(), 4);
         std::vector<ops::ConcatPart> parts{{3, nullptr}, constant_part(r, {2}, 1), {4, nullptr}};
         return n.finish(n.linear(n.add(ops::make_concat(1, std::move(parts)), {a, b}), 4));
       }},
      {"Slice",
       [](Rng& r) {
         // [1, 4, 5] -> rows 1:4:2, columns 0:5:3 -> [1, 2, 2] -> Linear 2->3.
         Net n({1, 4, 5}, r);
         const int s = n.add(ops::make_slice({{1, 1, 4, 2}, {2, 0, 5, 3}}), {n.input()});
         return n.finish(n.linear(s, 3));
       }},
      {"Gather",
       [](Rng& r) {
         // [1, 5, 3] -> Gather axis 1, indices [[4, 0], [0, 2]] (0 twice) -> [1, 2, 2, 3] ->
         // Linear 3->2.
         Net n({1, 5, 3}, r);
         const int g = n.add(ops::make_gather(1, {4, 0, 0, 2}, {2, 2}), {n.input()});
         return n.finish(n.linear(g, 2));
       }},
      {"GatherScalarIndex",
       [](Rng& r) {
         // x [1, 6] -> Linear 6->8 -> [1, 2, 4] -> Gather axis 2, index 3 (the axis goes) ->
         // [1, 2] -> Relu -> Linear 2->3.
         Net n({1, 6}, r);
         const int h = n.add(ops::make_reshape({2, 4}), {n.linear(n.input(), 8)});
         const int g = n.add(ops::make_gather(2, {3}, {}), {h});
         return n.finish(n.linear(n.relu(g), 3));
       }},
      {"Split", split_graph},
      {"UnsqueezeSqueezeOpset13", [](Rng& r) { return unsqueeze_squeeze_graph(r, 13); }},
      {"UnsqueezeSqueezeOpset11", [](Rng& r) { return unsqueeze_squeeze_graph(r, 11); }},
      {"ReduceMean",
       [](Rng& r) {
         // A ViT's pooling: tokens [1, 5, 4] -> ReduceMean over the tokens (keepdims 0) -> [1, 4].
         Net n({1, 5, 4}, r);
         return n.finish(n.add(ops::make_reduce(ops::Reduction::kMean, {1}, false), {n.input()}));
       }},
      {"ReduceSum",
       [](Rng& r) {
         // [1, 3, 4] -> Linear 4->5 -> Relu -> ReduceSum over axes 1, 2 (keepdims 1) -> [1, 1, 1]
         // -> Linear 1->2.
         Net n({1, 3, 4}, r);
         const int h = n.relu(n.linear(n.input(), 5));
         return n.finish(
             n.linear(n.add(ops::make_reduce(ops::Reduction::kSum, {1, 2}, true), {h}), 2));
       }},
      {"ReduceMeanKeepdims",
       [](Rng& r) {
         // [1, 2, 3, 4] -> ReduceMean over axis 2 (keepdims 1) -> [1, 2, 1, 4] -> Linear 4->3.
         Net n({1, 2, 3, 4}, r);
         return n.finish(
             n.linear(n.add(ops::make_reduce(ops::Reduction::kMean, {2}, true), {n.input()}), 3));
       }},
  };
  return cases;
}

uint64_t seed_of(const std::string& name) { return std::hash<std::string>{}(name) % 100003 + 1; }

double eps_of(at::ScalarType t) {
  return t == at::kFloat ? double(std::numeric_limits<float>::epsilon())
                         : std::numeric_limits<double>::epsilon();
}

// Boxes [1, *input_shape] around N(0, 1) centres: small, wide, and one with zero-width
// coordinates (a quarter of them).
std::vector<InputBox> boxes_for(const BoundGraph& g, Rng& rng) {
  std::vector<InputBox> out;
  for (const double radius : {0.05, 1.0, 0.5}) {
    const at::Tensor centre = rng.normal(g.input_shape());
    at::Tensor rad = rng.uniform(g.input_shape()) * radius;
    if (out.size() == 2) {
      rad = at::where(rng.uniform(g.input_shape()) < 0.25, at::zeros_like(rad), rad);
    }
    out.push_back({centre - rad, centre + rad});
  }
  return out;
}

// Points of the box lo, hi ([*shape]): lower, upper and centre corners, random vertices, uniform
// samples; [N, *shape] in lo's dtype, clamped into the box.
at::Tensor sample_box(Rng& rng, const at::Tensor& lo, const at::Tensor& hi) {
  const auto lead = [&](int64_t n) {
    std::vector<int64_t> s{n};
    s.insert(s.end(), lo.sizes().begin(), lo.sizes().end());
    return s;
  };
  const at::Tensor uniform = lo + (hi - lo) * rng.uniform(lead(kUniformSamples), lo.scalar_type());
  const at::Tensor vertices = at::where(rng.uniform(lead(kVertexSamples)) < 0.5, hi, lo);
  const at::Tensor all = at::cat(
      {lo.unsqueeze(0), hi.unsqueeze(0), ((lo + hi) / 2).unsqueeze(0), vertices, uniform}, 0);
  return at::minimum(at::maximum(all, lo), hi);
}

// Every sample y [N, spec] lies in bounds [1, spec] up to kSoundUlps·eps·max|value|.
void expect_contains(const Interval& bounds, const at::Tensor& y, const std::string& what) {
  const at::Tensor yd = y.to(at::kDouble);
  const at::Tensor lo = bounds.lower.to(at::kDouble);
  const at::Tensor hi = bounds.upper.to(at::kDouble);
  const double scale = std::max({1.0, yd.abs().max().item<double>(), lo.abs().max().item<double>(),
                                 hi.abs().max().item<double>()});
  const double tol = kSoundUlps * eps_of(bounds.lower.scalar_type()) * scale;
  const at::Tensor excess = at::maximum(lo - yd, yd - hi).reshape({-1});
  const int64_t worst = excess.argmax().item<int64_t>();
  if (excess[worst].item<double>() <= tol) return;
  const int64_t n = worst / y.size(1);
  const int64_t j = worst % y.size(1);
  ADD_FAILURE() << what << ": sample " << n << ", output " << j << ": "
                << fmt(yd[n][j].item<double>()) << " outside [" << fmt(lo[0][j].item<double>())
                << ", " << fmt(hi[0][j].item<double>()) << "] by "
                << fmt(excess[worst].item<double>()) << " > tolerance " << fmt(tol) << " ("
                << (excess > tol).sum().item<int64_t>() << " of " << excess.numel() << ")";
}

// inner ⊆ outer up to a few ulps of the magnitudes.
void expect_inside(const Interval& inner, const Interval& outer, const std::string& what) {
  const double tol = 4 * eps_of(inner.lower.scalar_type()) *
                     std::max({1.0, outer.lower.abs().max().item<double>(),
                               outer.upper.abs().max().item<double>()});
  EXPECT_GE((inner.lower - outer.lower).min().item<double>(), -tol) << what << ": lower";
  EXPECT_LE((inner.upper - outer.upper).max().item<double>(), tol) << what << ": upper";
}

void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  const at::Tensor diff = (a - b).abs().to(at::kDouble);
  const at::Tensor tol = b.abs().to(at::kDouble).clamp_min(1.0) * kExactRelTol;
  EXPECT_TRUE(diff.le(tol).all().item<bool>())
      << what << ": max difference " << fmt(diff.max().item<double>());
}

BoundOptions tight() {
  BoundOptions o;
  o.scheme = IntermediateScheme::kTight;
  return o;
}

class OpHarness : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpHarness, SoundConsistentAndShardable) {
  c10::NoGradGuard no_grad;
  const OpCase& c = GetParam();
  const uint64_t seed = seed_of(c.name);
  Rng build_rng(seed);
  BoundGraph g = c.build(build_rng);
  Rng copy_rng(seed);
  BoundGraph sharded = c.build(copy_rng);
  const collective::CommPtr comm = collective::make_mpi_communicator();
  sharding::shard_graph(sharded, sharding::ShardPlan::kFsdp, comm);
  const bool exact = g.affine_from_input(g.output());
  for (const at::ScalarType type : {at::kFloat, at::kDouble}) {
    g.to_dtype(type);
    sharded.to_dtype(type);
    Rng rng(seed * 7919 + 17);
    const std::vector<InputBox> boxes = boxes_for(g, rng);
    for (size_t i = 0; i < boxes.size(); ++i) {
      const std::string what =
          c.name + (type == at::kFloat ? " f32" : " f64") + " box " + std::to_string(i);
      SCOPED_TRACE(what);
      const InputBox box{boxes[i].lower.to(type), boxes[i].upper.to(type)};
      const Interval ibp = compute_bounds(g, box, Method::kIbp);
      const Interval crown = compute_bounds(g, box, Method::kCrown);
      const Interval crown_tight = compute_bounds(g, box, Method::kCrown, tight());
      ASSERT_EQ(ibp.lower.scalar_type(), type);

      // (a) soundness by sampling.
      const at::Tensor y = outputs(g, sample_box(rng, box.lower[0], box.upper[0]), {});
      ASSERT_EQ(y.scalar_type(), type);
      expect_contains(ibp, y, "IBP");
      expect_contains(crown, y, "CROWN");
      expect_contains(crown_tight, y, "CROWN(tight)");

      // (b) consistency.
      expect_inside(crown_tight, ibp, "CROWN(tight) inside IBP");
      if (exact) {
        expect_close(crown.lower, ibp.lower, "exact IBP: CROWN lower");
        expect_close(crown.upper, ibp.upper, "exact IBP: CROWN upper");
      }

      // (c) FSDP: the same values in the same order, so the same bits on every rank.
      for (const Method method : {Method::kIbp, Method::kCrown}) {
        const Interval& want = method == Method::kIbp ? ibp : crown;
        const Interval got = compute_bounds(sharded, box, method);
        EXPECT_TRUE(at::equal(want.lower, got.lower)) << "FSDP " << to_string(method) << " lower";
        EXPECT_TRUE(at::equal(want.upper, got.upper)) << "FSDP " << to_string(method) << " upper";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpHarness, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

// The cases whose op is affine (and whose graph mixes at most once) must reach the exactness
// check; a graph change that made them inexact would silently skip it.
TEST(OpHarnessCases, AffineCasesHaveExactIbp) {
  for (const OpCase& c : op_cases()) {
    Rng rng(seed_of(c.name));
    const BoundGraph g = c.build(rng);
    // Not affine in the input (a nonlinearity or two bounded inputs), or mixing twice
    // (ReduceMeanKeepdims: the mean, then a Linear).
    static const std::set<std::string> inexact{"Relu",
                                               "ConvRelu",
                                               "ConvTransposeAsymmetricRelu",
                                               "UnbatchedInput",
                                               "Conv1dRelu",
                                               "TransposeOfTheBatchDimension",
                                               "Sign",
                                               "Sigmoid",
                                               "SigmoidSaturated",
                                               "Tanh",
                                               "TanhSaturated",
                                               "Exp",
                                               "Erf",
                                               "ErfSaturated",
                                               "LeakyRelu",
                                               "Floor",
                                               "Ceil",
                                               "AddConstantBroadcastsInput",
                                               "SubConstantBroadcastsInput",
                                               "MulConstantBroadcastsInput",
                                               "DivConstantBroadcastsInput",
                                               "ExpandBounded",
                                               "MatMulByVector",
                                               "Max",
                                               "Min",
                                               "MinConstant",
                                               "Clip",
                                               "ClipMinOnly",
                                               "ClipAttributes",
                                               "WhereVariableAndConstant",
                                               "WhereTwoVariables",
                                               "LeakyReluDefaultAlpha",
                                               "LeakyReluSteep",
                                               "Sin",
                                               "SinAroundExtrema",
                                               "SinPeriods",
                                               "Cos",
                                               "CosAroundExtrema",
                                               "CosPeriods",
                                               "Gelu",
                                               "GeluTanh",
                                               "GeluDecomposed",
                                               "GeluDecomposedUnfused",
                                               "GeluWide",
                                               "Pow2",
                                               "Pow3",
                                               "Pow4",
                                               "Sqrt",
                                               "LayerNormLastAxis",
                                               "LayerNormTwoAxes",
                                               "LayerNormWide",
                                               "LayerNormDecomposed",
                                               "LayerNormDecomposedWide",
                                               "SoftmaxLastAxis",
                                               "SoftmaxMiddleAxis",
                                               "SoftmaxOpset11Grouped",
                                               "SoftmaxWide",
                                               "SoftmaxTiedMaximum",
                                               "MulTwoBounded",
                                               "MulTwoBoundedBroadcast",
                                               "MulSquare",
                                               "DivTwoBounded",
                                               "MatMulTwoBounded",
                                               "Add",
                                               "Sub",
                                               "ConvReluPadAveragePool",
                                               "MaxPool",
                                               "MaxPoolOverlapping",
                                               "MaxPoolStrideAboveKernel",
                                               "LinearTokens",
                                               "ConcatTwoBounded",
                                               "GatherScalarIndex",
                                               "Split",
                                               "ReduceSum",
                                               "ReduceMeanKeepdims"};
    const bool want = inexact.count(c.name) == 0;
    EXPECT_EQ(g.affine_from_input(g.output()), want) << c.name;
  }
}

// LeakyRelu lowers to α·x + (1 − α)·Relu(x): the same function for α of either side of 1.
TEST(LeakyRelu, LoweredForwardIsLeakyRelu) {
  for (const double alpha : {0.01, 0.1, 2.5, 0.0}) {
    testing::OnnxBuilder b;
    b.input("x", {1, 6}).output("y", {1, 6});
    b.node("op", "LeakyRelu", {"x"}, {"y"}, {testing::attr_float("alpha", alpha)});
    const BoundGraph g = io::load_onnx_bytes(b.bytes(), "leaky.onnx");
    const at::Tensor x = at::linspace(-3, 3, 60, at::kFloat).reshape({10, 6});
    c10::NoGradGuard no_grad;
    EXPECT_TRUE(at::allclose(g.forward(x), at::leaky_relu(x, alpha), 1e-6, 1e-6)) << alpha;
  }
}

// Where with a constant condition lowers to masked branches: the same function as at::where,
// a variable branch on either side, a constant or a second variable on the other, broadcast.
TEST(Where, LoweredForwardIsWhere) {
  const at::Tensor pick = at::tensor({1, 0, 0, 1, 1, 0}, at::kLong);
  const at::Tensor other = at::linspace(-1, 1, 6, at::kFloat);
  for (const bool variable_first : {true, false}) {
    for (const bool both : {false, true}) {
      testing::OnnxBuilder b;
      b.input("x", {1, 6}).output("y", {1, 6});
      b.initializer("pick", pick).initializer("one", at::tensor({1}, at::kLong));
      b.initializer("other", other).initializer("two", at::tensor({2.0f}));
      b.node("cond", "Equal", {"pick", "one"}, {"cond"});
      b.node("twice", "Mul", {"x", "two"}, {"x2"});
      const std::string second = both ? "x2" : "other";
      b.node("where", "Where",
             {"cond", variable_first ? "x" : second, variable_first ? second : "x"}, {"y"});
      const BoundGraph g = io::load_onnx_bytes(b.bytes(), "where.onnx");
      const at::Tensor x = at::linspace(-3, 3, 30, at::kFloat).reshape({5, 6});
      const at::Tensor s = both ? x * 2 : other.expand({5, 6});
      const at::Tensor cond = (pick == 1).expand({5, 6});
      c10::NoGradGuard no_grad;
      EXPECT_TRUE(at::allclose(g.forward(x),
                               variable_first ? at::where(cond, x, s) : at::where(cond, s, x)))
          << variable_first << both;
    }
  }
}

// Softmax over logits intervals 10⁴ wide: exp overflows float32 (and float64) past the
// intervals' middle, yet every bound stays finite and sound: each softmax value's interval
// inside [0, 1] (IBP and the engine's fallback where CROWN's rows are unbounded), and the bounds
// of the layer after it (IBP, CROWN, α-CROWN) hold at sampled points, corners included.
TEST(SoftmaxWideLogits, BoundsStayFiniteAndSound) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(dtype == at::kFloat ? "float32" : "float64");
    Rng rng(5);
    BoundGraph g = softmax_graph(rng, 13, -1, 1.0);
    g.to_dtype(dtype);
    const auto opts = at::TensorOptions().dtype(dtype);
    const at::Tensor centre = at::tensor({0.3, -0.2, 0.1, 0.5, -0.4, 0.2}, opts).reshape({1, 6});
    const InputBox box{centre - 4000, centre + 4000};  // logits |W1·x| up to ~10⁴ wide
    {
      CrownEngine engine(g, box, BoundOptions{});
      engine.compute_intermediate_bounds();
      for (int i = 1; i < g.size(); ++i) {
        if (g.node(i).op->op_type() != "Mul" || i == g.output()) continue;
        const Interval& b = engine.bounds(i);
        EXPECT_TRUE(at::isfinite(b.lower).all().item<bool>() &&
                    at::isfinite(b.upper).all().item<bool>());
        EXPECT_GE(b.lower.min().item<double>(), 0.0);
        EXPECT_LE(b.upper.max().item<double>(), 1.0);
      }
    }
    at::Generator gen = at::detail::createCPUGenerator(9);
    const at::Tensor u = at::rand({4000, 6}, gen, opts);
    const at::Tensor corners = at::randint(2, {64, 6}, gen, opts);
    const at::Tensor x = box.lower + at::cat({u, corners}) * (box.upper - box.lower);
    c10::NoGradGuard no_grad;
    const at::Tensor y = g.forward(x);
    for (const Method m : {Method::kIbp, Method::kCrown, Method::kAlphaCrown}) {
      SCOPED_TRACE(std::string(enum_name(m)));
      const Interval b = compute_bounds(g, box, m);  // throws NumericError when not finite
      EXPECT_TRUE((y >= b.lower - 1e-5).all().item<bool>());
      EXPECT_TRUE((y <= b.upper + 1e-5).all().item<bool>());
    }
  }
}

}  // namespace
}  // namespace distcrown
