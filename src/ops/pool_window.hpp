#pragma once
// The window geometry shared by the 2-D pooling operators (AveragePool, MaxPool): kernel, strides
// and explicit, possibly asymmetric padding, with ceil_mode = 0 and dilations 1. Read from an ONNX
// node by read_pool_window, which refuses with one line what the operators do not implement
// (auto_pad SAME_*, ceil_mode = 1, dilations != 1, pads as large as the kernel).
// Input [batch, C, H, W] -> output [batch, C, Ho, Wo], Ho = (H + top + bottom - kH) / sH + 1.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace distcrown {
struct LoweringContext;
}

namespace distcrown::ops {

struct PoolWindow {
  std::array<int64_t, 2> kernel{1, 1};      // kH, kW
  std::array<int64_t, 2> stride{1, 1};      // sH, sW
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // ONNX order: top, left, bottom, right

  [[nodiscard]] bool padded() const { return pads != std::array<int64_t, 4>{0, 0, 0, 0}; }
  /// Windows share input elements (a stride smaller than the kernel in some dim).
  [[nodiscard]] bool overlapping() const { return stride[0] < kernel[0] || stride[1] < kernel[1]; }
  /// The padding as at::constant_pad_nd takes it for [..., H, W]: {left, right, top, bottom}.
  [[nodiscard]] std::vector<int64_t> torch_pads() const;
  /// The same with every entry negated: constant_pad_nd with it crops the padding away again.
  [[nodiscard]] std::vector<int64_t> torch_crop() const;
  /// Output spatial size {Ho, Wo} for an input of spatial size {H, W}.
  [[nodiscard]] std::array<int64_t, 2> output_size(int64_t H, int64_t W) const;
};

/// The window of a 2-D pooling node (kernel_shape, strides, pads, auto_pad, dilations,
/// ceil_mode), checked against its input, which must be 4-D [batch, C, H, W]. Fails with
/// ctx.fail / ctx.unsupported naming the node.
PoolWindow read_pool_window(const LoweringContext& ctx);

}  // namespace distcrown::ops
