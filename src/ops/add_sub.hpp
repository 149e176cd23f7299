#pragma once
// Add / Sub of two bounded tensors of equal shape (residual connections), and addition of a
// constant that broadcasts into the bounded input's shape. Sub(x, c) is Add(x, −c) (exact in IEEE
// arithmetic) and Sub(c, x) is Add(Neg(x), c).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_add();
NodePtr make_sub();
/// y = x + c, c broadcastable (right-aligned, batch dim included) to x's shape.
NodePtr make_add_const(ParamPtr c);

}  // namespace distcrown::ops
