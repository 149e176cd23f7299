// Hostile models and properties (the hardening issue's cases): each is refused at load with one
// clear distcrown::Error naming the node or bound, never a crash, an allocation of the impossible
// or NaN bounds.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "distcrown/bab/verifier.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/util/error.hpp"
#include "onnx_builder.hpp"

namespace distcrown {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::OnnxBuilder;

// Runs fn and checks it throws E (a distcrown::Error) whose one-line message holds `fragment`.
template <class E>
void expect_refused(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected an error with '" << fragment << "'";
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// x [1, 4] -> Gemm(W [3, 4], b [3]) with the given values.
OnnxBuilder gemm(const at::Tensor& w, const at::Tensor& b,
                 std::vector<io::OnnxAttribute> attrs = {attr_int("transB", 1)}) {
  OnnxBuilder m;
  m.input("x", {1, 4}).output("y");
  m.initializer("W", w).initializer("b", b);
  m.node("fc", "Gemm", {"x", "W", "b"}, {"y"}, std::move(attrs));
  return m;
}

void load(const OnnxBuilder& m) { (void)io::load_onnx_bytes(m.bytes(), "hostile.onnx"); }

TEST(HostileModel, TransposeWithAnAxisOutOfRangeIsRefused) {
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0, 5}, {0, -1}, {0, 0}, {0, 1, 2}, {1 << 30, 0}}) {
    OnnxBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("t", "Transpose", {"x"}, {"y"}, {attr_ints("perm", perm)});
    expect_refused<ModelError>([&] { load(m); },
                               "node 't' (Transpose): perm must be a permutation");
  }
}

// A first input dimension above 1 is part of the input (no batch dim): an operator other than
// those that read such a tensor is refused in one line.
TEST(HostileModel, AnOperatorOfAnInputWithoutABatchDimensionIsRefused) {
  OnnxBuilder m;
  m.input("x", {7, 4}).output("y");
  m.node("r", "Relu", {"x"}, {"y"});
  expect_refused<UnsupportedError>([&] { load(m); },
                                   "node 'r' (Relu): unsupported: Relu of a tensor without a batch "
                                   "dimension");
}

TEST(HostileModel, UnsqueezeAndSqueezeAxesOutOfRangeAreRefused) {
  for (const bool unsqueeze : {true, false}) {
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{7}, {-7}, {1, 1}}) {
      OnnxBuilder m;
      m.input("x", {1, 1, 4}).output("y");
      m.initializer("axes", at::tensor(axes, at::kLong));
      m.node("u", unsqueeze ? "Unsqueeze" : "Squeeze", {"x", "axes"}, {"y"});
      expect_refused<ModelError>([&] { load(m); }, "node 'u'");
    }
  }
}

TEST(HostileModel, DimensionsWhoseProductOverflowsAreRefused) {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32},
                                           {int64_t{1} << 62, 4},
                                           {1, 1, 1, int64_t{1} << 40}}) {
    OnnxBuilder m;
    m.input("x", {1, 4}).output("y");
    io::OnnxTensor t = testing::onnx_tensor("C", at::zeros({0}));
    t.dims = dims;
    m.model().initializers.push_back(t);
    m.node("add", "Add", {"x", "C"}, {"y"});
    expect_refused<UnsupportedError>([&] { load(m); }, "more than 2^31 elements");
    OnnxBuilder in;
    std::vector<int64_t> batched{1};  // batch 1, then the hostile dimensions
    batched.insert(batched.end(), dims.begin(), dims.end());
    in.input("x", batched).output("y");
    in.node("r", "Relu", {"x"}, {"y"});
    expect_refused<UnsupportedError>([&] { load(in); }, "more than 2^31 elements");
  }
}

TEST(HostileModel, NonFiniteParametersAreRefused) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor w = at::randn({3, 4});
  w[1][2] = nan;
  expect_refused<ModelError>([&] { load(gemm(w, at::zeros({3}))); },
                             "node 'fc' (Gemm): a parameter holds NaN or infinite values");
  at::Tensor b = at::zeros({3});
  b[0] = -inf;
  expect_refused<ModelError>([&] { load(gemm(at::randn({3, 4}), b)); }, "NaN or infinite");
  expect_refused<ModelError>(
      [&] {
        load(gemm(at::randn({3, 4}), at::zeros({3}),
                  {attr_int("transB", 1), attr_float("alpha", nan)}));
      },
      "NaN or infinite");
  expect_refused<ModelError>(
      [&] {
        load(gemm(at::randn({3, 4}), at::ones({3}),
                  {attr_int("transB", 1), attr_float("beta", inf)}));
      },
      "NaN or infinite");
}

TEST(HostileModel, DivisionByAZeroConstantIsRefused) {
  OnnxBuilder m;
  m.input("x", {1, 4}).output("y");
  m.initializer("d", at::tensor({1.0F, 0.0F, 2.0F, 3.0F}));
  m.node("div", "Div", {"x", "d"}, {"y"});
  expect_refused<ModelError>([&] { load(m); }, "node 'div' (Div): division by zero");
}

TEST(HostileModel, OverflowInFloat32GivesAnErrorNotNaNBounds) {
  c10::NoGradGuard no_grad;
  // 3e38 is a float32, but the sums of the second layer are not.
  OnnxBuilder m;
  m.input("x", {1, 4}).output("y");
  m.initializer("W1", at::full({4, 4}, 3e38)).initializer("W2", at::full({2, 4}, 3e38));
  m.node("fc1", "Gemm", {"x", "W1"}, {"h"}, {attr_int("transB", 1)});
  m.node("relu", "Relu", {"h"}, {"r"});
  m.node("fc2", "Gemm", {"r", "W2"}, {"y"}, {attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(m.bytes(), "big.onnx");
  const InputBox box{at::full({1, 4}, -1.0), at::full({1, 4}, 1.0)};
  for (Method method : {Method::kIbp, Method::kCrown, Method::kAlphaCrown}) {
    expect_refused<NumericError>([&] { (void)compute_bounds(g, box, method); },
                                 "the bounds are not finite");
  }
}

TEST(HostileProperty, AnInputBoundBeyondFloat32IsRefused) {
  OnnxBuilder m;
  m.input("x", {1, 2}).output("y");
  m.node("r", "Relu", {"x"}, {"y"});
  const BoundGraph g = io::load_onnx_bytes(m.bytes(), "relu.onnx");
  const io::VnnlibProperty p = io::parse_vnnlib_string(
      "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
      "(declare-const Y_1 Real)\n(assert (>= X_0 0))\n(assert (<= X_0 1e308))\n"
      "(assert (>= X_1 0))\n(assert (<= X_1 1))\n(assert (>= Y_0 1))\n",
      "big.vnnlib");
  expect_refused<InvalidArgument>([&] { (void)io::enclosing_box(p.cases.front(), g, at::kFloat); },
                                  "does not fit float");
  expect_refused<InvalidArgument>([&] { (void)io::box_of(p.cases.front(), g, at::kFloat); },
                                  "does not fit float");
  const InputBox wide = io::enclosing_box(p.cases.front(), g, at::kDouble);  // fits float64
  EXPECT_EQ(wide.upper.flatten()[0].item<double>(), 1e308);
}

// 0.1 is not a float32: with X_0 fixed at 0.1 (lower = upper) no float32 point lies in the box.
// The counterexample is checked in double at the exact point instead of being rejected.
TEST(HostileProperty, FixedInputsThatFloat32CannotRepresentAreSat) {
  OnnxBuilder m;
  m.input("x", {1, 2}).output("y");
  m.initializer("W", at::tensor({1.0F, 0.0F}).reshape({1, 2}));
  m.node("fc", "Gemm", {"x", "W"}, {"y"}, {attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(m.bytes(), "identity.onnx");
  const io::VnnlibProperty p = io::parse_vnnlib_string(
      "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
      "(assert (>= X_0 0.1))\n(assert (<= X_0 0.1))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"
      "(assert (>= Y_0 0.1))\n",
      "fixed.vnnlib");
  bab::VerifyOptions o;
  o.timeout_s = 20;
  o.bab.progress = false;
  const bab::VerifyResult r = bab::verify(g, p, o);
  ASSERT_EQ(r.verdict, bab::Verdict::kSat) << r.detail;
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_EQ(r.counterexample->x.at(0), 0.1);  // exactly the fixed value
  EXPECT_GE(r.counterexample->y.at(0), 0.1);
}

}  // namespace
}  // namespace distcrown
