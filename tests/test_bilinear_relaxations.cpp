// The relaxation of products of two bounded tensors (ops/bilinear: Mul with broadcasting, MatMul)
// under α-CROWN's plane parameters: CROWN's planes at the initial parameters, and sound linear
// bounds for any parameters after projection, checked at sampled points of the boxes (their
// corners included) in float32 and float64, on random, zero-width, one-sided and very wide
// intervals.
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/bounds/interval.hpp"
#include "ops/bilinear.hpp"

namespace distcrown {
namespace {

struct Product {
  std::string name;
  NodePtr op;
  std::vector<int64_t> x_shape;  // [1, *]
  std::vector<int64_t> y_shape;
  std::vector<int64_t> out_shape;
};

Product mul_broadcast() {
  Product p{"Mul", ops::make_bilinear_mul(), {1, 3, 4}, {1, 3, 1}, {1, 3, 4}};
  p.op->bind_shapes({p.x_shape, p.y_shape}, p.out_shape);
  return p;
}

Product matmul() {
  Product p{"MatMul", ops::make_bilinear_matmul(), {1, 2, 3, 4}, {1, 2, 4, 5}, {1, 2, 3, 5}};
  p.op->bind_shapes({p.x_shape, p.y_shape}, p.out_shape);
  return p;
}

// Intervals of one kind over a shape [B, *]: "random" centres and widths, "zero" width,
// "positive" and "negative" sides, "wide" (|bounds| up to 1e3).
Interval intervals(const std::vector<int64_t>& shape, const std::string& kind,
                   at::ScalarType type) {
  at::Tensor c = at::randn(shape, at::kDouble);
  at::Tensor w = at::rand(shape, at::kDouble);
  if (kind == "zero") w.zero_();
  if (kind == "positive") c = c.abs() + w;
  if (kind == "negative") c = -(c.abs() + w);
  if (kind == "wide") {
    c = c * 300;
    w = w * 700;
  }
  return {(c - w).to(type), (c + w).to(type)};
}

// n points of the box, [n, B, *]: a quarter at random vertices (where a product of two
// variables reaches its extremes), the rest uniform.
at::Tensor samples(const Interval& b, int64_t n) {
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), b.lower.sizes().begin(), b.lower.sizes().end());
  at::Tensor t = at::rand(shape, b.lower.options());
  t.slice(0, 0, n / 4).copy_((t.slice(0, 0, n / 4) > 0.5).to(t.scalar_type()));
  return at::minimum(b.lower + (b.upper - b.lower) * t, b.upper);
}

double eps_of(at::ScalarType t) { return t == at::kFloat ? 1.19e-7 : 2.3e-16; }

// Rows of the spec, [S, B, *out]: random coefficients of both signs.
at::Tensor random_rows(const Product& p, int64_t B, at::ScalarType type) {
  std::vector<int64_t> shape{5, B};
  shape.insert(shape.end(), p.out_shape.begin() + 1, p.out_shape.end());
  return at::randn(shape, at::TensorOptions().dtype(type));
}

// The linear bounds Σ A_x·x + Σ A_y·y + bias of A·(x ∘ y), for every row: [n, S, B] at the
// samples, as (lower, upper), with the exact values A·f and a rounding scale.
struct Check {
  at::Tensor lower, upper, exact, scale;
};

Check evaluate(const Product& p, const Interval& x, const Interval& y, const at::Tensor& A,
               const RelaxParams& rp) {
  const int64_t B = x.lower.size(0);
  BiasPair bias;
  const Interval* in[] = {&x, &y};
  const std::vector<BoundA> out = p.op->backward_relaxed(BoundA{A, A}, in, bias, rp);
  const int64_t n = 512;
  const at::Tensor xs = samples(x, n).to(at::kDouble);  // [n, B, *x]
  const at::Tensor ys = samples(y, n).to(at::kDouble);
  const auto points = [&](const at::Tensor& t) { return t.reshape({n, B, -1}); };
  // Σ over a node's elements of coefficient · point: [S, B, k] · [n, B, k] -> [n, S, B].
  const auto dot = [](const at::Tensor& coef, const at::Tensor& pts) {
    return at::einsum("sbk,nbk->nsb", {coef, pts});
  };
  const int64_t S = A.size(0);
  const auto coef = [&](const at::Tensor& t) { return t.to(at::kDouble).reshape({S, B, -1}); };
  const at::Tensor in_x[] = {xs.flatten(0, 1), ys.flatten(0, 1)};
  const at::Tensor f = points(p.op->forward(in_x));  // [n, B, out]
  Check c;
  c.exact = dot(coef(A), f);
  c.lower = dot(coef(out[0].lA), points(xs)) + dot(coef(out[1].lA), points(ys)) +
            bias.lower.to(at::kDouble).unsqueeze(0);
  c.upper = dot(coef(out[0].uA), points(xs)) + dot(coef(out[1].uA), points(ys)) +
            bias.upper.to(at::kDouble).unsqueeze(0);
  // Rounding of the float32 path is relative to the terms summed, not to their sum.
  const auto largest = [&](const Interval& v) {
    return at::maximum(v.lower.abs(), v.upper.abs()).to(at::kDouble).reshape({B, -1}).amax(1);
  };
  const at::Tensor mag = largest(x) * largest(y);             // [B]
  c.scale = (coef(A).abs().sum(2) * (mag + 1)).unsqueeze(0);  // [1, S, B]
  return c;
}

void expect_sound(const Check& c, at::ScalarType type, const std::string& what) {
  const at::Tensor tol = 64 * eps_of(type) * c.scale;
  EXPECT_LE((c.lower - c.exact - tol).max().item<double>(), 0) << what << ": lower bound above";
  EXPECT_LE((c.exact - c.upper - tol).max().item<double>(), 0) << what << ": upper bound below";
}

// α of every row and both sides, [S, *P] per side, from the node's initial parameters.
std::pair<at::Tensor, at::Tensor> rows_of(const at::Tensor& init, int64_t S) {
  std::vector<int64_t> full{2, S};
  full.insert(full.end(), init.sizes().begin(), init.sizes().end());
  const at::Tensor a = init.unsqueeze(0).unsqueeze(0).expand(full).clone();
  return {a[0], a[1]};
}

// [B, *shape without its batch dim]
std::vector<int64_t> batched(const std::vector<int64_t>& shape, int64_t B) {
  std::vector<int64_t> out{B};
  out.insert(out.end(), shape.begin() + 1, shape.end());
  return out;
}

const std::vector<std::string> kKinds = {"random", "zero", "positive", "negative", "wide"};

class BilinearRelaxation : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] Product product() const { return GetParam() == "Mul" ? mul_broadcast() : matmul(); }
};

TEST_P(BilinearRelaxation, InitialParametersGiveCrownsPlanes) {
  c10::NoGradGuard no_grad;
  at::manual_seed(3);
  const Product p = product();
  const int64_t B = 2;
  const Interval x = intervals(batched(p.x_shape, B), "random", at::kDouble);
  const Interval y = intervals(batched(p.y_shape, B), "random", at::kDouble);
  const at::Tensor A = random_rows(p, B, at::kDouble);
  ASSERT_TRUE(p.op->traits().relaxation_params);
  const auto [al, au] = rows_of(p.op->initial_relaxation_params(x), A.size(0));
  BiasPair crown_bias;
  BiasPair init_bias;
  const Interval* in[] = {&x, &y};
  const auto crown = p.op->backward(BoundA{A, A}, in, crown_bias);
  const auto init = p.op->backward_relaxed(BoundA{A, A}, in, init_bias, alpha_params(al, au));
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(at::allclose(crown[k].lA, init[k].lA, 1e-12, 1e-12)) << "input " << k;
    EXPECT_TRUE(at::allclose(crown[k].uA, init[k].uA, 1e-12, 1e-12)) << "input " << k;
  }
  EXPECT_TRUE(at::allclose(crown_bias.lower, init_bias.lower, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(crown_bias.upper, init_bias.upper, 1e-12, 1e-12));
}

// CROWN's planes and any parameters the optimiser may reach (projected onto [0, 1]) give sound
// bounds on every kind of interval.
TEST_P(BilinearRelaxation, ProjectedParametersStaySound) {
  c10::NoGradGuard no_grad;
  at::manual_seed(5);
  const Product p = product();
  const int64_t B = 2;
  for (const auto type : {at::kFloat, at::kDouble}) {
    for (const std::string& kx : kKinds) {
      for (const std::string& ky : kKinds) {
        const Interval x = intervals(batched(p.x_shape, B), kx, type);
        const Interval y = intervals(batched(p.y_shape, B), ky, type);
        const at::Tensor A = random_rows(p, B, type);
        const std::string what =
            std::string(type == at::kFloat ? "f32 " : "f64 ") + "x " + kx + ", y " + ky;
        expect_sound(evaluate(p, x, y, A, {}), type, what + ", CROWN");
        for (const double spread : {0.3, 5.0}) {
          auto [al, au] = rows_of(p.op->initial_relaxation_params(x), A.size(0));
          al = al + spread * at::randn(al.sizes(), al.options());
          au = au + spread * at::randn(au.sizes(), au.options());
          p.op->project_relaxation_params(al, x);
          p.op->project_relaxation_params(au, x);
          expect_sound(evaluate(p, x, y, A, alpha_params(al, au)), type,
                       what + ", spread " + std::to_string(spread));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BilinearRelaxation, ::testing::Values("Mul", "MatMul"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace distcrown
