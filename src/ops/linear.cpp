#include "ops/linear.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/bilinear.hpp"

namespace distcrown::ops {

at::Tensor matmul_row_independent(const at::Tensor& A, const at::Tensor& w) {
  const int64_t n = w.size(1);
  if (n >= kRowIndependentMinColumns) return at::matmul(A, w);
  const at::Tensor wide =
      at::cat({w, at::zeros({w.size(0), kRowIndependentMinColumns - n}, w.options())}, 1);
  return at::matmul(A, wide).narrow(-1, 0, n).contiguous();
}

at::Tensor LinearMaps::apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  return at::linear(x, w, b);
}

// A [S, B, ..., out] -> A W [S, B, ..., in].
at::Tensor LinearMaps::map_a(const at::Tensor& A, const at::Tensor& w) const {
  return matmul_row_independent(A, w);
}

at::Tensor LinearMaps::bias_term(const at::Tensor& A, const at::Tensor& b) const {
  return contract(A, b);
}

namespace {

class BoundLinear final : public LinearMaps {
 public:
  using LinearMaps::LinearMaps;
  std::string op_type() const override { return "Linear"; }
  OpTraits traits() const override {
    return {.affine = true, .mixes_elements = true, .dense_matrix = true};
  }
};

Value lower_gemm(LoweringContext& ctx) {
  // Y = alpha·A'·B' + beta·C with A' = A or Aᵀ, B' = B or Bᵀ. Only A may be variable.
  if (ctx.attrs.get_int("transA", 0) != 0) ctx.unsupported("Gemm with transA=1");
  at::Tensor w = ctx.constant(1);
  if (w.dim() != 2) ctx.fail("weight B must be 2-D, got " + std::to_string(w.dim()) + "-D");
  if (ctx.attrs.get_int("transB", 0) == 0) w = w.t();  // stored [out, in]
  const double alpha = ctx.attrs.get_float("alpha", 1.0);
  const double beta = ctx.attrs.get_float("beta", 1.0);
  if (alpha != 1.0) w = w * alpha;
  ParamPtr bias;
  if (ctx.has_input(2)) {
    at::Tensor c = ctx.constant(2);
    if (beta != 1.0) c = c * beta;
    if (c.numel() != w.size(0)) {
      // A full-matrix C equal for the batch row is the only other form seen; refuse the rest.
      if (!(c.dim() == 2 && c.size(0) == 1 && c.size(1) == w.size(0))) {
        ctx.fail("bias C has " + std::to_string(c.numel()) + " elements, expected " +
                 std::to_string(w.size(0)));
      }
    }
    bias = ctx.param(c.reshape({-1}));
  }
  if (ctx.all_constant()) {
    const at::Tensor& x = ctx.constant(0);
    return Value::of_constant(at::linear(x, w.to(x.scalar_type()),
                                         bias ? bias->get().to(x.scalar_type()) : at::Tensor()));
  }
  return ctx.emit(make_linear(ctx.param(w), bias), {ctx.bounded(0)});
}

Value lower_matmul(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(at::matmul(ctx.constant(0), ctx.constant(1)));
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  const int x = ctx.bounded(0);
  if (ctx.inputs[1].is_bounded()) {
    // Two bounded operands (attention): [B, *lead, n, k] · [B, *lead, k, m].
    const auto& sx = ctx.builder.shape(x);
    const auto& sy = ctx.builder.shape(ctx.inputs[1].node);
    if (sx.size() < 3 || sx.size() != sy.size() ||
        !std::equal(sx.begin(), sx.end() - 2, sy.begin()) || sx.back() != sy[sy.size() - 2]) {
      ctx.unsupported(
          "MatMul of two variable tensors other than [batch, .., n, k] x [batch, .., "
          "k, m] with equal leading dims");
    }
    return ctx.emit(make_bilinear_matmul(), {x, ctx.inputs[1].node});
  }
  const at::Tensor& w = ctx.constant(1);  // [in, out]
  if (w.dim() != 2) ctx.unsupported("MatMul with a " + std::to_string(w.dim()) + "-D constant");
  return ctx.emit(make_linear(ctx.param(w.t()), nullptr), {x});
}

}  // namespace

NodePtr make_linear(ParamPtr weight, ParamPtr bias) {
  return std::make_unique<BoundLinear>(std::move(weight), std::move(bias));
}

void register_linear(OpRegistry& r) {
  r.add("Gemm", kAllOpsets, lower_gemm);
  r.add("MatMul", kAllOpsets, lower_matmul);
}

}  // namespace distcrown::ops
