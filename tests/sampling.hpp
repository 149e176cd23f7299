#pragma once
// Shared by the sampling tests (soundness, α-CROWN, branch and bound): one intra-op thread,
// exact number formatting for failure messages, and concrete outputs at sampled points.
#include <iomanip>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/graph/bound_graph.hpp"

namespace distcrown::testing {

// The graphs are tiny: one intra-op thread is faster than several contending for shared cores,
// and makes the timings reproducible.
class SingleThread : public ::testing::Environment {
 public:
  void SetUp() override { at::set_num_threads(1); }
};
[[maybe_unused]] inline const auto* const kSingleThread =
    ::testing::AddGlobalTestEnvironment(new SingleThread);

/// v with `digits` significant digits (17 round-trips a double).
inline std::string fmt(double v, int digits = 17) {
  std::ostringstream s;
  s << std::setprecision(digits) << v;
  return s.str();
}

/// C·y (or y when C is undefined) at the points x [N, *input_shape]: [N, spec].
inline at::Tensor outputs(const BoundGraph& g, const at::Tensor& x, const at::Tensor& C) {
  c10::NoGradGuard no_grad;
  const at::Tensor y = g.forward(x).reshape({x.size(0), -1});
  return C.defined() ? at::matmul(y, C.t()) : y;
}

}  // namespace distcrown::testing
