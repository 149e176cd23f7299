#include "ops/linear.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/bilinear.hpp"
#include "ops/reshape.hpp"

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

// C · x for a constant matrix C [m, n] and a variable x of ONNX shape [.., n, k] or [n]: the
// Linear with weight C on x's second-to-last dim (swapped to the last and back). It mixes ONNX
// dim 0 when x is 2-D, so x is read unbatched (ml4acopf: C · xᵀ of x [1, n]).
Value lower_constant_times_variable(LoweringContext& ctx) {
  const at::Tensor& c = ctx.constant(0);
  if (c.dim() != 2)
    ctx.unsupported("MatMul of a " + std::to_string(c.dim()) + "-D constant by a variable tensor");
  std::vector<int64_t> shape = sizes_of(ctx, 1);
  const int x = unbatched_view(ctx, 1);
  const size_t r = shape.size();
  if (shape[r >= 2 ? r - 2 : 0] != c.size(1)) ctx.fail("MatMul operands' inner dimensions differ");
  if (r == 1) {
    return as_onnx_shaped(ctx, ctx.emit(make_linear(ctx.param(c), nullptr), {x}).node, {c.size(0)});
  }
  std::vector<int64_t> swap(r + 1);
  std::iota(swap.begin(), swap.end(), int64_t{0});
  std::swap(swap[r - 1], swap[r]);
  const int t = ctx.emit(make_transpose(swap), {x}, "/swap").node;
  const int y = ctx.emit(make_linear(ctx.param(c), nullptr), {t}).node;
  shape[r - 2] = c.size(0);
  return as_onnx_shaped(ctx, ctx.emit(make_transpose(swap), {y}, "/unswap").node, shape);
}

// x [.., n] · v [n] -> [..]: ONNX promotes v to [n, 1] and drops that 1 again (ml4acopf_2024's
// piecewise-linear Sigmoid: [1, 24, 54] · [54]). A Linear n -> 1, then a reshape without it.
Value lower_times_vector(LoweringContext& ctx) {
  const at::Tensor& v = ctx.constant(1);
  std::vector<int64_t> shape = sizes_of(ctx, 0);  // the ONNX shape of x
  if (shape.empty() || shape.back() != v.size(0)) ctx.fail("MatMul operands do not match");
  shape.pop_back();
  const bool unbatched = ctx.inputs[0].unbatched;
  if (!unbatched && shape.size() < 2) {
    ctx.unsupported(
        "MatMul of a [batch, n] variable by a 1-D constant (a result of the batch "
        "dim alone)");
  }
  if (unbatched && shape.empty()) ctx.unsupported("MatMul of a 1-D variable by a 1-D constant");
  const int x = unbatched ? ctx.bounded_unbatched(0) : ctx.bounded(0);
  const int dot = ctx.emit(make_linear(ctx.param(v.reshape({1, -1})), nullptr), {x}, "/dot").node;
  // [B, .., 1] -> [B, *ONNX shape] (unbatched), or [B, *ONNX shape[1:]] (batched).
  if (!unbatched) {
    return ctx.emit(make_reshape({shape.begin() + 1, shape.end()}), {dot}, "/drop");
  }
  const int dropped = ctx.emit(make_reshape(shape), {dot}, "/drop").node;
  return as_onnx_shaped(ctx, dropped, shape);
}

Value lower_matmul(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(at::matmul(ctx.constant(0), ctx.constant(1)));
  if (ctx.inputs.size() != 2) ctx.fail("expects 2 inputs");
  if (ctx.inputs[0].is_constant()) return lower_constant_times_variable(ctx);
  if (ctx.inputs[1].is_constant() && ctx.constant(1).dim() == 1) return lower_times_vector(ctx);
  if (ctx.inputs[0].unbatched && ctx.inputs[1].is_constant()) {
    const at::Tensor& w = ctx.constant(1);  // [in, out]: the last dim, any dims before it
    if (w.dim() != 2) ctx.unsupported("MatMul with a " + std::to_string(w.dim()) + "-D constant");
    std::vector<int64_t> shape = sizes_of(ctx, 0);
    shape.back() = w.size(1);
    const int x = ctx.bounded_unbatched(0);
    return as_onnx_shaped(ctx, ctx.emit(make_linear(ctx.param(w.t()), nullptr), {x}).node, shape);
  }
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
