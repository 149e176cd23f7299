#pragma once
// Value types of bound propagation (layouts follow auto_LiRPA):
//   Interval     lower/upper, each [batch, *node_shape]
//   BoundA       linear bounds w.r.t. one node: lA, uA, each [spec, batch, *node_shape]; either may
//                be undefined when only one side is wanted
//   BiasPair     the constant terms accumulated on the way back, each [spec, batch]
//   InputBox     the L-infinity box of the input, [batch, *input_shape]
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace distcrown {

/// CROWN's backward passes run on a multiple of this many rows (spec) so that a row's bits do not
/// depend on the rows beside it (docs/architecture.md "Row independence"; the engine pads them,
/// src/methods/row_align.hpp). contract() and concretize() keep every such pass row-independent.
inline constexpr int64_t kRowAlign = 16;

struct Interval {
  at::Tensor lower;  // [batch, *shape]
  at::Tensor upper;  // [batch, *shape]
};

struct BoundA {
  at::Tensor lA;  // [spec, batch, *shape] or undefined
  at::Tensor uA;  // [spec, batch, *shape] or undefined
};

struct BiasPair {
  at::Tensor lower;  // [spec, batch] or undefined (= 0)
  at::Tensor upper;  // [spec, batch] or undefined (= 0)
};

using InputBox = Interval;

/// acc += term, where an undefined acc counts as 0.
void accumulate(at::Tensor& acc, const at::Tensor& term);

/// Applies an affine map's adjoint to both sides of `a`. Computes it once when lA and uA are the
/// same tensor (as at the start of every backward pass, until a ReLU makes them differ) and keeps
/// the result shared; `bias_term(A)` ([spec, batch] or undefined) is added to both biases.
template <class MapA, class BiasTerm>
BoundA map_sides(const BoundA& a, BiasPair& bias, MapA&& map_a, BiasTerm&& bias_term) {
  BoundA out;
  if (a.lA.defined() && a.lA.is_same(a.uA)) {
    out.lA = map_a(a.lA);
    out.uA = out.lA;
    const at::Tensor t = bias_term(a.lA);
    if (t.defined()) {
      accumulate(bias.lower, t);
      accumulate(bias.upper, t);
    }
    return out;
  }
  if (a.lA.defined()) {
    out.lA = map_a(a.lA);
    const at::Tensor t = bias_term(a.lA);
    if (t.defined()) accumulate(bias.lower, t);
  }
  if (a.uA.defined()) {
    out.uA = map_a(a.uA);
    const at::Tensor t = bias_term(a.uA);
    if (t.defined()) accumulate(bias.upper, t);
  }
  return out;
}

/// For map_sides on operators without a constant term.
inline at::Tensor no_bias(const at::Tensor& /*A*/) { return {}; }

/// Sum of A ⊙ x over the node dims, A [spec, batch, *shape], x broadcastable to [batch, *shape];
/// result [spec, batch]. The contribution of a constant x to a bias.
at::Tensor contract(const at::Tensor& A, const at::Tensor& x);

/// True when every element of the defined sides of `b` is finite (no NaN, no ±inf).
[[nodiscard]] bool all_finite(const Interval& b);

/// Concretizes linear bounds over an input box (auto_LiRPA's Linf concretize):
///   lower = lA·c − |lA|·r + lbias,  upper = uA·c + |uA|·r + ubias,   c = (u+l)/2, r = (u−l)/2.
/// Returns lower/upper shaped [batch, spec] (undefined where the A is undefined).
Interval concretize(const BoundA& a, const BiasPair& bias, const InputBox& box);

}  // namespace distcrown
