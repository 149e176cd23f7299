#pragma once
// The default kit for an elementwise operator y = f(x) with f monotone (non-decreasing or
// non-increasing). A subclass gives f (apply) and its direction and gets:
//   forward   f(x)
//   IBP       [f(l), f(u)] (swapped when non-increasing): exact per element
//   backward  the constant relaxation f(l) ≤ y ≤ f(u) per neuron (sound for every monotone f;
//             the input's A becomes zero and A⁺·f(l) + A⁻·f(u) enters the lower bias, the other
//             way round the upper bias). An operator with a tighter linear relaxation (a sigmoid's
//             tangents and chords) overrides backward().
// and the lowering lower_elementwise<Op>: a constant input is folded, a bounded one gets Op.
// ops/sign.cpp is a whole operator of this kind (docs/architecture.md, "Adding an operator").
#include "distcrown/graph/bound_node.hpp"
#include "graph/op_registry.hpp"

namespace distcrown::ops {

class MonotoneElementwise : public BoundNode {
 public:
  enum class Direction { kNonDecreasing, kNonIncreasing };
  explicit MonotoneElementwise(Direction direction) : direction_(direction) {}

  [[nodiscard]] OpTraits traits() const override {
    return {.elementwise = true, .needs_input_bounds = true, .splits_anywhere = true};
  }
  [[nodiscard]] at::Tensor forward(std::span<const at::Tensor> x) const override;
  [[nodiscard]] Interval ibp(std::span<const Interval* const> x) const override;
  [[nodiscard]] std::vector<BoundA> backward(const BoundA& a,
                                             std::span<const Interval* const> bounds,
                                             BiasPair& bias) const override;

  /// f, elementwise, any shape.
  [[nodiscard]] virtual at::Tensor apply(const at::Tensor& x) const = 0;

 private:
  Direction direction_;
};

/// Lowering of a one-input elementwise ONNX operator to `Op` (default-constructible).
template <class Op>
Value lower_elementwise(LoweringContext& ctx) {
  if (ctx.all_constant()) return Value::of_constant(Op().apply(ctx.constant(0)));
  return ctx.emit(std::make_unique<Op>(), {ctx.bounded(0)});
}

}  // namespace distcrown::ops
