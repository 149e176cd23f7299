// Gelu (opset 20) of a bounded tensor, lowered into the nodes its definition names, each bounded
// with its own relaxation (auto_LiRPA's BoundGELU, operators/gelu.py, relaxes GELU as one
// function; this decomposition is sound but looser):
//   approximate = "none"  y = x · 0.5·(1 + erf(x/√2))                       Erf: ops/s_shaped
//   approximate = "tanh"  y = x · 0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³)))  x³: ops/power
// The final product of two bounded tensors is McCormick's (ops/bilinear). The decomposed form
// exported before opset 20 (Div, Erf, Add, Mul, Mul) lowers into the same kinds of nodes.
#include <ATen/ATen.h>

#include <cmath>
#include <numbers>
#include <string>

#include "distcrown/graph/op_registry.hpp"
#include "distcrown/ops/add_sub.hpp"
#include "distcrown/ops/bilinear.hpp"
#include "distcrown/ops/mul_div.hpp"
#include "distcrown/ops/power.hpp"
#include "distcrown/ops/s_shaped.hpp"

namespace distcrown::ops {
namespace {

constexpr double kCubic = 0.044715;

Value lower_gelu(LoweringContext& ctx) {
  if (ctx.inputs.size() != 1) ctx.fail("expects 1 input");
  const std::string approximate = ctx.attrs.get_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    ctx.fail("approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  const bool tanh = approximate == "tanh";
  if (ctx.all_constant()) return Value::of_constant(at::gelu(ctx.constant(0), approximate));
  const auto scalar = [&](double v) { return ctx.param(at::scalar_tensor(v, at::kDouble)); };
  const int x = ctx.bounded(0);
  int s = 0;  // erf(x/√2) or tanh(√(2/π)·(x + 0.044715·x³))
  if (!tanh) {
    const int a = ctx.emit(make_mul_const(scalar(std::numbers::sqrt2 / 2)), {x}, "/scaled").node;
    s = ctx.emit(make_erf(), {a}, "/erf").node;
  } else {
    const int cube = ctx.emit(make_pow(3), {x}, "/cube").node;
    const int c = ctx.emit(make_mul_const(scalar(kCubic)), {cube}, "/cubic_term").node;
    const int sum = ctx.emit(make_add(), {x, c}, "/inner").node;
    const double k = std::sqrt(2 * std::numbers::inv_pi);
    const int a = ctx.emit(make_mul_const(scalar(k)), {sum}, "/scaled").node;
    s = ctx.emit(make_tanh(), {a}, "/tanh").node;
  }
  const int one = ctx.emit(make_add_const(scalar(1.0)), {s}, "/plus_one").node;
  const int half = ctx.emit(make_mul_const(scalar(0.5)), {one}, "/half").node;
  return ctx.emit(make_bilinear_mul(), {x, half});
}

}  // namespace

void register_gelu(OpRegistry& r) { r.add("Gelu", {.first = 20}, lower_gelu); }

}  // namespace distcrown::ops
