// The step functions, all non-decreasing: Sign (y = sign(x) ∈ {−1, 0, 1}), Floor and Ceil.
// Everything else (IBP, the constant relaxation f(l) ≤ y ≤ f(u), the lowering) comes from
// ops/monotone.hpp.
#include <ATen/ATen.h>

#include "ops/monotone.hpp"

namespace distcrown::ops {
namespace {

// A step function: its gradient is 0 almost everywhere, so a counterexample search differentiates
// through it as through the identity (the straight-through estimator of binarised networks). The
// values are the step's own: f(x) + (x − x) is f(x) exactly for finite x.
class StepFunction : public MonotoneElementwise {
 public:
  StepFunction() : MonotoneElementwise(Direction::kNonDecreasing) {}
  OpTraits traits() const override {
    OpTraits t = MonotoneElementwise::traits();
    t.surrogate_gradient = true;
    return t;
  }
  at::Tensor forward_surrogate(std::span<const at::Tensor> x) const override {
    return forward(x).detach() + (x[0] - x[0].detach());
  }
};

class BoundSign final : public StepFunction {
 public:
  std::string op_type() const override { return "Sign"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::sign(x); }
};

class BoundFloor final : public StepFunction {
 public:
  std::string op_type() const override { return "Floor"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::floor(x); }
};

class BoundCeil final : public StepFunction {
 public:
  std::string op_type() const override { return "Ceil"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::ceil(x); }
};

}  // namespace

void register_sign(OpRegistry& r) {
  r.add("Sign", {.first = 9}, lower_elementwise<BoundSign>);
  r.add("Floor", kAllOpsets, lower_elementwise<BoundFloor>);
  r.add("Ceil", kAllOpsets, lower_elementwise<BoundCeil>);
}

}  // namespace distcrown::ops
