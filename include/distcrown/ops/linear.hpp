#pragma once
// Linear: y = x Wᵀ + b on the last dim. x [batch, ..., in], W [out, in], b [out] (optional).
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_linear(ParamPtr weight, ParamPtr bias);

}  // namespace distcrown::ops
