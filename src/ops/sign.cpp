// Sign: y = sign(x) ∈ {−1, 0, 1}, non-decreasing. Everything else (IBP, the constant relaxation,
// the lowering) comes from ops/monotone.hpp.
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

}  // namespace

void register_sign(OpRegistry& r) { r.add("Sign", {.first = 9}, lower_elementwise<BoundSign>); }

}  // namespace distcrown::ops
