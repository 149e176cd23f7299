#pragma once
// BatchNormalization in inference mode, folded to a per-channel affine map:
//   y = x·w + b,  w = γ/√(var + ε),  b = β − mean·w;  x [batch, C, *spatial], w and b [C, 1, ...].
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_batchnorm(ParamPtr weight, ParamPtr bias);

}  // namespace distcrown::ops
