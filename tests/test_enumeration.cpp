// Properties decided by enumeration (bab/enumeration.hpp) and the point evaluation under it
// (io/point_model.hpp): a model that reads one input as a position (Cast to int64, then a Gather
// index, as cctsdb_yolo places its patch) and the rest as values.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distcrown/bab/enumeration.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/point_model.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/error.hpp"
#include "onnx_builder.hpp"

namespace distcrown {
namespace {

using io::InputRead;
using testing::attr_int;
using testing::OnnxBuilder;

// x [5]: image = x[0:4] (times 1, a value read), p = x[4] read as int64; y = image[p], [1].
// `position_as_value`: p is also added to y (then read as a value too); `spare`: x [6], x[5]
// never read.
std::string position_model(bool position_as_value = false, bool spare = false) {
  OnnxBuilder b;
  b.model().opset = 13;
  b.input("x", {spare ? 6 : 5}).output("y", {1});
  b.initializer("starts", at::tensor({0}, at::kLong))
      .initializer("ends", at::tensor({4}, at::kLong));
  b.initializer("four", at::tensor(4, at::kLong)).initializer("zero", at::tensor({0}, at::kLong));
  b.initializer("one", at::tensor({1.0F}));
  b.node("image", "Slice", {"x", "starts", "ends"}, {"img"});
  b.node("scaled", "Mul", {"img", "one"}, {"img1"});
  b.node("p", "Gather", {"x", "four"}, {"p"}, {attr_int("axis", 0)});
  b.node("pi", "Cast", {"p"}, {"pi"}, {attr_int("to", io::kOnnxInt64)});
  b.node("pu", "Unsqueeze", {"pi", "zero"}, {"pu"});
  if (position_as_value) {
    b.node("pick", "Gather", {"img1", "pu"}, {"v"}, {attr_int("axis", 0)});
    b.node("plus", "Add", {"v", "p"}, {"y"});
  } else {
    b.node("pick", "Gather", {"img1", "pu"}, {"y"}, {attr_int("axis", 0)});
  }
  return b.bytes();
}

// The image [0.1, 0.5, 0.9, 0.3] fixed, the position in [p_lo, p_hi]; unsafe: Y_0 >= threshold.
io::VnnlibProperty position_property(double p_lo, double p_hi, double threshold,
                                     bool image_free = false) {
  std::string text;
  for (int i = 0; i < 5; ++i) text += "(declare-const X_" + std::to_string(i) + " Real)\n";
  text += "(declare-const Y_0 Real)\n";
  const double image[4] = {0.1, 0.5, 0.9, 0.3};
  for (int i = 0; i < 4; ++i) {
    const double lo = image[i];
    const double hi = image[i] + (image_free && i == 0 ? 0.05 : 0.0);
    text += "(assert (>= X_" + std::to_string(i) + " " + std::to_string(lo) + "))\n";
    text += "(assert (<= X_" + std::to_string(i) + " " + std::to_string(hi) + "))\n";
  }
  text += "(assert (>= X_4 " + std::to_string(p_lo) + "))\n";
  text += "(assert (<= X_4 " + std::to_string(p_hi) + "))\n";
  text += "(assert (>= Y_0 " + std::to_string(threshold) + "))\n";
  return io::parse_vnnlib_string(text, "position.vnnlib");
}

TEST(PointModel, EvaluatesAsTheLoadedGraphDoes) {
  OnnxBuilder b;
  b.input("x", {1, 4}).output("y", {1, 3});
  b.initializer("W", at::randn({3, 4})).initializer("c", at::randn({3}));
  b.node("fc", "Gemm", {"x", "W", "c"}, {"h"}, {attr_int("transB", 1)});
  b.node("relu", "Relu", {"h"}, {"y"});
  const io::PointModel model(b.bytes(), "mlp.onnx");
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "mlp.onnx");
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({4});
  EXPECT_EQ(model.input_numel(), 4);
  EXPECT_TRUE(at::allclose(model.evaluate(x, at::kFloat), g.forward(x.reshape({1, 4})).flatten()));
  EXPECT_EQ(model.evaluate(x, at::kDouble).scalar_type(), at::kDouble);
}

TEST(PointModel, InputReadsFollowSelectionsToIntegerCasts) {
  const std::vector<InputRead> value(4, InputRead::kAsValue);
  std::vector<InputRead> want = value;
  want.push_back(InputRead::kAsInteger);
  EXPECT_EQ(io::PointModel(position_model(), "p.onnx").input_reads(), want);
  want.push_back(InputRead::kUnread);
  EXPECT_EQ(io::PointModel(position_model(false, true), "p.onnx").input_reads(), want);
  want = value;
  want.push_back(InputRead::kAsValue);  // also added to the output
  EXPECT_EQ(io::PointModel(position_model(true), "p.onnx").input_reads(), want);
}

TEST(Enumeration, DecidesByEveryPosition) {
  const io::PointModel model(position_model(), "p.onnx");
  // Positions 0..3: the image's largest value is 0.9.
  const io::VnnlibProperty safe = position_property(0, 3.7, 0.95);
  ASSERT_EQ(bab::enumeration_refusal(model, safe), "");
  const bab::VerifyResult unsat = bab::decide_by_enumeration(model, safe, Deadline());
  EXPECT_EQ(unsat.verdict, bab::Verdict::kUnsat) << unsat.detail;
  EXPECT_NE(unsat.detail.find("4 points"), std::string::npos) << unsat.detail;

  const bab::VerifyResult sat =
      bab::decide_by_enumeration(model, position_property(0, 3.7, 0.85), Deadline());
  ASSERT_EQ(sat.verdict, bab::Verdict::kSat) << sat.detail;
  ASSERT_TRUE(sat.counterexample.has_value());
  EXPECT_DOUBLE_EQ(sat.counterexample->x[4], 2.0);
  EXPECT_NEAR(sat.counterexample->y[0], 0.9, 1e-6);

  // A position box [0.5, 1.5]: the classes 0 (at x = 0.5) and 1; position 1 holds 0.5.
  const bab::VerifyResult half =
      bab::decide_by_enumeration(model, position_property(0.5, 1.5, 0.45), Deadline());
  ASSERT_EQ(half.verdict, bab::Verdict::kSat) << half.detail;
  EXPECT_DOUBLE_EQ(half.counterexample->x[4], 1.0);
  EXPECT_EQ(bab::decide_by_enumeration(model, position_property(0.5, 1.5, 0.6), Deadline()).verdict,
            bab::Verdict::kUnsat);
}

TEST(Enumeration, RefusesWhatItCannotEnumerate) {
  const io::PointModel model(position_model(), "p.onnx");
  EXPECT_NE(bab::enumeration_refusal(model, position_property(0, 3, 0.5, true))
                .find("reads it as a value"),
            std::string::npos);
  EXPECT_NE(bab::enumeration_refusal(model, position_property(0, 1e6, 0.5)).find("more than"),
            std::string::npos);
  EXPECT_NE(bab::enumeration_refusal(model, position_property(2, 2, 0.5)).find("no free input"),
            std::string::npos);
  const io::PointModel both(position_model(true), "p.onnx");
  EXPECT_NE(bab::enumeration_refusal(both, position_property(0, 3, 0.5)).find("as a value"),
            std::string::npos);
  EXPECT_THROW((void)bab::decide_by_enumeration(both, position_property(0, 3, 0.5), Deadline()),
               InvalidArgument);
}

}  // namespace
}  // namespace distcrown
