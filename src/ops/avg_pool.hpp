#pragma once
// Average pooling, a linear map with non-negative coefficients (so IBP in centre/radius form is
// exact for one such map of the input box):
//   AveragePool        x [batch, C, H, W] -> [batch, C, Ho, Wo] over the windows of a PoolWindow;
//                      the padding is zeros; the divisor is kH·kW, or with count_include_pad = 0
//                      the number of input (non-padding) elements in the window
//   GlobalAveragePool  x [batch, C, *spatial] -> [batch, C, 1, ...]: the mean over *spatial
#include "distcrown/graph/bound_node.hpp"
#include "ops/pool_window.hpp"

namespace distcrown::ops {

NodePtr make_average_pool(PoolWindow window, bool count_include_pad);

NodePtr make_global_average_pool();

}  // namespace distcrown::ops
