#pragma once
// Convex elementwise functions with auto_LiRPA's relaxation (chord above, tangent below, α-CROWN
// over the tangent point): Exp, and Reciprocal on positive inputs (an interval reaching 0 is a
// NumericError). Factories for lowerings that compose them (Div of two bounded tensors).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_exp();
NodePtr make_reciprocal();

}  // namespace distcrown::ops
