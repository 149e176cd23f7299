#pragma once
// Activation checkpointing for one step of a differentiated computation (torch.utils.checkpoint):
// α-CROWN differentiates whole backward passes, and autograd would keep every intermediate
// tensor of every step (a ReLU step on patches keeps its unfolded slopes, intercepts and the
// clamped A: several tensors the size of the A) until the loss's backward. recomputed() keeps
// only the step's inputs and runs the step again inside the backward: the same operations on the
// same inputs, so the same values and gradients (bit for bit in tests/test_recompute.cpp and on
// α-CROWN's bounds, docs/architecture.md), less memory, one more forward of the step.
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown {

using TensorsFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

/// fn(inputs). With grad mode on and an input that requires grad, the outputs carry a gradient
/// function that keeps `inputs` (not fn's intermediates) and recomputes fn to differentiate it.
/// `fn` must be a pure function of its inputs (it runs twice) and every input must be defined.
std::vector<at::Tensor> recomputed(const TensorsFn& fn, const std::vector<at::Tensor>& inputs);

}  // namespace distcrown
