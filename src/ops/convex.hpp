#pragma once
// Convex elementwise functions with auto_LiRPA's relaxation (chord above, tangent below, α-CROWN
// over the tangent point): Exp, and Reciprocal on positive inputs (an interval reaching 0 is a
// NumericError). Factories for lowerings that compose them (Div of two bounded tensors).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_exp();
NodePtr make_reciprocal();
/// Reciprocal of an input known to be ≥ input_floor > 0 by construction: its bounds are clamped
/// there before use (intermediate bounds may be looser than that fact).
NodePtr make_reciprocal_at_least(double input_floor);
/// Reciprocal for an input with GraphBuilder::known_floor `known_floor`: clamped there (less 1e-6
/// relative) when it is > 0 (√(v + ε)), else plain Reciprocal.
NodePtr make_reciprocal_of(double known_floor);

}  // namespace distcrown::ops
