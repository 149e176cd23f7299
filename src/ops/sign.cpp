// The step functions, all non-decreasing: Sign (y = sign(x) ∈ {−1, 0, 1}), Floor and Ceil.
// Everything else (IBP, the constant relaxation f(l) ≤ y ≤ f(u), the lowering) comes from
// ops/monotone.hpp.
#include <ATen/ATen.h>

#include "ops/monotone.hpp"

namespace distcrown::ops {
namespace {

class BoundSign final : public MonotoneElementwise {
 public:
  BoundSign() : MonotoneElementwise(Direction::kNonDecreasing) {}
  std::string op_type() const override { return "Sign"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::sign(x); }
};

class BoundFloor final : public MonotoneElementwise {
 public:
  BoundFloor() : MonotoneElementwise(Direction::kNonDecreasing) {}
  std::string op_type() const override { return "Floor"; }
  at::Tensor apply(const at::Tensor& x) const override { return at::floor(x); }
};

class BoundCeil final : public MonotoneElementwise {
 public:
  BoundCeil() : MonotoneElementwise(Direction::kNonDecreasing) {}
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
