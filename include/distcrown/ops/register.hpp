#pragma once
// One registration function per operator family; register_all() calls each (one line per family).
#include "distcrown/graph/op_registry.hpp"

namespace distcrown::ops {

void register_linear(OpRegistry& r);  // Gemm, MatMul
void register_relu(OpRegistry& r);    // Relu
void register_conv(OpRegistry& r);    // Conv
void register_reshape(
    OpRegistry& r);  // Flatten, Reshape, Shape, Squeeze, Unsqueeze, Transpose(const)
void register_add_sub(OpRegistry& r);    // Add, Sub
void register_mul_div(OpRegistry& r);    // Mul, Div, Neg
void register_batchnorm(OpRegistry& r);  // BatchNormalization
void register_constant(
    OpRegistry& r);  // Constant, Identity, Dropout, Cast; Gather/Concat/Slice of constants

inline void register_all(OpRegistry& r) {
  register_linear(r);
  register_relu(r);
  register_conv(r);
  register_reshape(r);
  register_add_sub(r);
  register_mul_div(r);
  register_batchnorm(r);
  register_constant(r);
}

}  // namespace distcrown::ops
