#pragma once
// One branching decision of branch and bound, as data: which node's input, which element of it,
// at which point, which side. A ReLU is split at 0: its inactive side is kBelow (z <= 0), its
// active side kAbove (z >= 0). A node with OpTraits::splits_anywhere (Sigmoid, Tanh, GELU, ...)
// is split at a point strictly inside its element's interval (relu_layout.hpp's general nodes),
// and so is either input of a product of two bounded tensors (OpTraits::splits_operands: Mul,
// MatMul; `input` says which).
#include <cstdint>

namespace distcrown::bab {

struct Split {
  enum class Side { kBelow, kAbove };
  int node = 0;         // graph index of the split node (its input is what is split)
  int64_t element = 0;  // flat index into the node's input, batch excluded
  double point = 0.0;   // the input is <= point (kBelow) or >= point (kAbove)
  Side side = Side::kBelow;
  int input = 0;  // which of the node's inputs is split (a product's second operand: 1)
};

/// A ReLU's split at 0: inactive (z <= 0) or active (z >= 0).
inline Split relu_split(int node, int64_t element, bool active) {
  return Split{node, element, 0.0, active ? Split::Side::kAbove : Split::Side::kBelow};
}

}  // namespace distcrown::bab
