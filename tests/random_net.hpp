#pragma once
// Random test networks: a seeded generator of float32 tensors (independent of test order) and a
// GraphBuilder that adds operators with random parameters. Shared by the soundness tests and the
// per-operator harness.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/graph/bound_graph.hpp"
#include "ops/batchnorm.hpp"
#include "ops/conv.hpp"
#include "ops/linear.hpp"
#include "ops/relu.hpp"
#include "ops/reshape.hpp"

namespace distcrown::testing {

// Deterministic random tensors from a seeded generator of its own (independent of test order).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(at::detail::createCPUGenerator(seed)) {}
  at::Tensor normal(at::IntArrayRef shape, double scale = 1.0) {
    return at::randn(shape, gen_, at::TensorOptions().dtype(at::kFloat)) * scale;
  }
  at::Tensor uniform(at::IntArrayRef shape, at::ScalarType type = at::kFloat) {
    return at::rand(shape, gen_, at::TensorOptions().dtype(type));
  }
  // Magnitudes U(0.5, 2) with random signs (scales and divisors away from zero).
  at::Tensor signed_scale(at::IntArrayRef shape) {
    const at::Tensor mag = uniform(shape) * 1.5 + 0.5;
    return at::where(uniform(shape) < 0.5, -mag, mag);
  }
  // Magnitudes U(lo, hi) with random signs, the first entry negative (negative scales, divisors).
  at::Tensor with_negatives(at::IntArrayRef shape, double lo, double hi) {
    const at::Tensor mag = uniform(shape) * (hi - lo) + lo;
    const at::Tensor sign =
        at::where(uniform(shape) < 0.5, -at::ones_like(mag), at::ones_like(mag));
    at::Tensor v = (mag * sign).reshape({-1});
    v[0] = -v[0].abs();  // at least one negative entry
    return v.reshape(shape);
  }

 private:
  at::Generator gen_;
};

// GraphBuilder with random parameters.
class Net {
 public:
  Net(std::vector<int64_t> input_shape, Rng& rng) : b_(std::move(input_shape)), rng_(rng) {}

  [[nodiscard]] int input() const { return b_.input(); }
  [[nodiscard]] const std::vector<int64_t>& shape(int i) const { return b_.shape(i); }

  int add(NodePtr op, std::vector<int> inputs) {
    std::string name = "n";
    name += std::to_string(++count_);
    return b_.add(std::move(name), std::move(op), std::move(inputs));
  }

  // Linear on the last dim: W ~ N(0, w_scale²/fan_in), b ~ N(b_shift, b_scale²).
  int linear(int x, int64_t out, double w_scale = 1.0, double b_scale = 0.3, double b_shift = 0) {
    const int64_t in = shape(x).back();
    const at::Tensor w = rng_.normal({out, in}, w_scale / std::sqrt(double(in)));
    const at::Tensor b = rng_.normal({out}, b_scale) + b_shift;
    return add(ops::make_linear(make_param(w), make_param(b)), {x});
  }
  int linear_with_bias(int x, const at::Tensor& b, double w_scale = 1.0) {
    const int64_t in = shape(x).back();
    const at::Tensor w = rng_.normal({b.size(0), in}, w_scale / std::sqrt(double(in)));
    return add(ops::make_linear(make_param(w), make_param(b)), {x});
  }
  int linear_no_bias(int x, int64_t out) {
    const int64_t in = shape(x).back();
    const at::Tensor w = rng_.normal({out, in}, 1.0 / std::sqrt(double(in)));
    return add(ops::make_linear(make_param(w), nullptr), {x});
  }
  int relu(int x) { return add(ops::make_relu(), {x}); }
  int conv(int x, int64_t c_out, int64_t k, ops::Conv2dOptions o, bool with_bias = true) {
    const int64_t c_in = shape(x)[1];
    const at::Tensor w = rng_.normal({c_out, c_in, k, k}, 1.0 / std::sqrt(double(c_in * k * k)));
    ParamPtr b = with_bias ? make_param(rng_.normal({c_out}, 0.3)) : nullptr;
    return add(ops::make_conv2d(make_param(w), std::move(b), o), {x});
  }
  int flatten(int x) {
    int64_t n = 1;
    for (size_t i = 1; i < shape(x).size(); ++i) n *= shape(x)[i];
    return add(ops::make_reshape({n}, "Flatten"), {x});
  }
  // BatchNorm folded to y = x·w + b, w and b per channel ([C, 1, ...] after the channel dim).
  int batchnorm(int x) {
    std::vector<int64_t> s{shape(x)[1]};
    for (size_t i = 2; i < shape(x).size(); ++i) s.push_back(1);
    const at::Tensor w = rng_.with_negatives(s, 0.3, 1.5);
    const at::Tensor b = rng_.normal(s, 0.5);
    return add(ops::make_batchnorm(make_param(w), make_param(b)), {x});
  }

  // A constant of x's shape without the batch dim (broadcasts over the batch): N(0, 1), or
  // signed_scale when it must stay away from zero (a divisor).
  at::Tensor like(int x, bool nonzero) {
    const std::vector<int64_t> s(shape(x).begin() + 1, shape(x).end());
    return nonzero ? rng_.signed_scale(s) : rng_.normal(s);
  }

  // Ends the builder (one call per Net); `output` may be computed in the same expression.
  BoundGraph finish(int output) { return std::move(b_).finish(output); }

 private:
  GraphBuilder b_;
  Rng& rng_;
  int count_ = 0;
};

}  // namespace distcrown::testing
