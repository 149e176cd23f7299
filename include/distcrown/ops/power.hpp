#pragma once
// Powers with a constant exponent with auto_LiRPA's relaxations (ops/power.cpp): x^n for an
// integer n ≥ 2 (even: convex; odd: S-shaped about 0) and √x on x ≥ 0 (an interval reaching
// below 0 is a NumericError). Factories for lowerings that compose them (LayerNormalization).
#include <cstdint>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_pow(int64_t n);
NodePtr make_sqrt();

}  // namespace distcrown::ops
