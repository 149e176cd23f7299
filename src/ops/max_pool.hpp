#pragma once
// MaxPool (2-D): x [batch, C, H, W] -> [batch, C, Ho, Wo], the maximum over each window of a
// PoolWindow, the padding never chosen (-inf). IBP: max-pool of the lower and of the upper bounds.
// CROWN: auto_LiRPA's relaxation (BoundMaxPool.bound_backward, non-optimised), per window o with
// i* the first input of largest lower bound (max_pool2d's choice):
//   lower  y_o >= x_i*
//   upper  y_o <= x_i*  when l_i* >= u_j for every other j of the window (then y_o = x_i*),
//          y_o <= max_j u_j otherwise.
// Overlapping windows and padding, which auto_LiRPA's backward refuses or mishandles, are handled
// per window here (each window's own i* and "other inputs").
#include "distcrown/graph/bound_node.hpp"
#include "ops/pool_window.hpp"

namespace distcrown::ops {

NodePtr make_max_pool(PoolWindow window);

}  // namespace distcrown::ops
