#pragma once
// Powers with a constant exponent with auto_LiRPA's relaxations (ops/power.cpp): x^n for an
// integer n ≥ 2 (even: convex; odd: S-shaped about 0) and √x on x ≥ 0 (an interval reaching
// below 0 is a NumericError). Factories for lowerings that compose them (LayerNormalization).
#include <cstdint>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_pow(int64_t n);
NodePtr make_sqrt();
/// √x of an input known to be ≥ input_floor ≥ 0 by construction: its bounds are clamped there
/// before use (intermediate bounds may be looser than that fact).
NodePtr make_sqrt_at_least(double input_floor);
/// Sqrt for an input with GraphBuilder::known_floor `known_floor`: clamped there (less 1e-6
/// relative) when it is ≥ 0 (x² + ε, a mean of squares), else plain Sqrt.
NodePtr make_sqrt_of(double known_floor);

}  // namespace distcrown::ops
