#pragma once
// Multiplication and division of a bounded tensor by a constant (input normalisation), and Neg.
// The constant broadcasts (right-aligned, batch dim included) into the input's shape.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_mul_const(ParamPtr c);  // y = x * c
NodePtr make_div_const(ParamPtr c);  // y = x / c
NodePtr make_neg();                  // y = −x

}  // namespace distcrown::ops
