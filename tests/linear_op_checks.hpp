#pragma once
// Checks of one operator at a time, shared by the tests of linear operators (test_pooling,
// test_upsampling): a one-node graph in float64, its backward step from a given A, and that a
// linear operator's step is exactly its adjoint (Σ A·f(x) = Σ A'·x + bias at random x) with IBP
// holding at corners and uniform points; one-line refusals of ONNX variants.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"
#include "onnx_builder.hpp"
#include "random_net.hpp"
#include "sampling.hpp"

namespace distcrown::testing {

// A graph input [1, *shape] -> op, in float64.
inline BoundGraph single_op(const std::vector<int64_t>& shape, NodePtr op) {
  GraphBuilder b(shape);
  const int n = b.add("op", std::move(op), {b.input()});
  BoundGraph g = std::move(b).finish(n);
  g.to_dtype(at::kDouble);
  return g;
}

inline const BoundNode& op_of(const BoundGraph& g) { return *g.node(g.output()).op; }

// The relaxation of one node as a backward step from A [S, 1, C, Ho, Wo]: lA, uA on the input
// and the biases [S, 1].
struct Step {
  at::Tensor lA, uA, lbias, ubias;
};

inline Step backward_step(const BoundNode& op, const at::Tensor& A, const Interval* in) {
  BiasPair bias;
  const std::vector<const Interval*> bounds{in};
  const std::vector<BoundA> out = op.backward({A, A}, bounds, bias);
  const auto zero = at::zeros({A.size(0), A.size(1)}, A.options());
  return {out[0].lA, out[0].uA, bias.lower.defined() ? bias.lower : zero,
          bias.upper.defined() ? bias.upper : zero};
}

inline void expect_near(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  const double scale = std::max(1.0, want.abs().max().item<double>());
  const double diff = (got - want).abs().max().item<double>();
  EXPECT_LE(diff, 1e-12 * scale) << what << ": max difference " << fmt(diff);
}

// Random A [S, 1, *shape] with a sixth of the entries exactly 0.
inline at::Tensor random_a(Rng& rng, int64_t S, const std::vector<int64_t>& shape) {
  std::vector<int64_t> full{S, 1};
  full.insert(full.end(), shape.begin(), shape.end());
  const at::Tensor a = rng.normal(full).to(at::kDouble);
  return at::where(rng.uniform(full) < 1.0 / 6, at::zeros_like(a), a);
}

// Points of [l, u] ([1, *shape]): the corners, random vertices, points with every coordinate at
// one end, uniform points; [N, *shape].
inline at::Tensor points_in(Rng& rng, const Interval& b, int64_t n) {
  std::vector<int64_t> full{n};
  full.insert(full.end(), b.lower.sizes().begin() + 1, b.lower.sizes().end());
  const at::Tensor t = rng.uniform(full).to(at::kDouble);
  const at::Tensor uniform = b.lower + (b.upper - b.lower) * t;
  const at::Tensor vertices =
      at::where(rng.uniform(full) < 0.5, b.upper.expand(full), b.lower.expand(full));
  const at::Tensor all = at::cat({b.lower, b.upper, (b.lower + b.upper) / 2, vertices, uniform});
  return at::minimum(at::maximum(all, b.lower), b.upper);
}

// Σ over the non-spec dims of A [S, 1, ...] · v [N, ...]: [N, S].
inline at::Tensor pair(const at::Tensor& A, const at::Tensor& v) {
  return at::matmul(v.reshape({v.size(0), -1}), A.reshape({A.size(0), -1}).t());
}

inline void expect_affine_step(const BoundGraph& g, Rng& rng, const std::string& what) {
  SCOPED_TRACE(what);
  const BoundNode& op = op_of(g);
  const std::vector<int64_t> in(g.input_shape().begin() + 1, g.input_shape().end());
  const std::vector<int64_t> out(g.output_shape().begin() + 1, g.output_shape().end());
  const at::Tensor A = random_a(rng, 4, out);
  const Step s = backward_step(op, A, nullptr);
  EXPECT_TRUE(at::equal(s.lA, s.uA));
  EXPECT_TRUE(at::equal(s.lbias, s.ubias));
  std::vector<int64_t> pts{64};
  pts.insert(pts.end(), in.begin(), in.end());
  const at::Tensor x = rng.normal(pts).to(at::kDouble);
  const at::Tensor f = pair(A, g.forward(x));
  const at::Tensor lin = pair(s.lA, x) + s.lbias.reshape({1, -1});
  EXPECT_LE((f - lin).abs().max().item<double>(),
            1e-12 * std::max(1.0, f.abs().max().item<double>()));

  const at::Tensor c = rng.normal(g.input_shape()).to(at::kDouble);
  const at::Tensor r = rng.uniform(g.input_shape()).to(at::kDouble);
  const Interval box{c - r, c + r};
  const Interval ibp = op.ibp(std::vector<const Interval*>{&box});
  const at::Tensor y = g.forward(points_in(rng, box, 256));
  const double tol = 1e-12;
  EXPECT_TRUE((y >= ibp.lower - tol).all().item<bool>());
  EXPECT_TRUE((y <= ibp.upper + tol).all().item<bool>());
}

inline void expect_refused(const OnnxBuilder& b, const std::vector<std::string>& fragments,
                           const std::string& file = "pool.onnx") {
  try {
    (void)io::load_onnx_bytes(b.bytes(), file);
    ADD_FAILURE() << "no error";
  } catch (const UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an UnsupportedError: " << e.what();
  }
}

}  // namespace distcrown::testing
