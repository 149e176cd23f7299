#pragma once
// 2-D convolution, groups = 1. x [batch, C_in, H, W], weight [C_out, C_in, kH, kW], bias [C_out].
#include <array>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};  // symmetric (top = bottom, left = right)
  std::array<int64_t, 2> dilation{1, 1};
};

NodePtr make_conv2d(ParamPtr weight, ParamPtr bias, Conv2dOptions options);

}  // namespace distcrown::ops
