#pragma once
// Synthetic networks for benchmarks and tests, as ONNX models (so the same files can be handed to
// the `distcrown` executable, under mpirun) or loaded graphs. Seeded random weights, PyTorch's
// default init: U(−1/√fan_in, 1/√fan_in) for weights and biases.
#include <cstdint>
#include <string>

#include "distcrown/graph/bound_graph.hpp"
#include "io/onnx_model.hpp"

namespace distcrown::io {

/// in -> [Gemm(h) -> Relu] x depth -> Gemm(out); input "input" [1, in], output "output" [1, out].
OnnxModel random_mlp_onnx(int64_t in, int64_t hidden, int depth, int64_t out, uint64_t seed);

/// [1, 1, 28, 28] -> Conv(1->16, k4, s2, p1) -> Relu -> Conv(16->32, k4, s2, p1) -> Relu ->
/// Flatten -> Gemm(1568 -> hidden) -> Relu -> Gemm(hidden -> 10).
OnnxModel random_convnet_onnx(int64_t hidden, uint64_t seed);

/// The loaded graph of random_mlp_onnx.
BoundGraph make_random_mlp(int64_t in, int64_t hidden, int depth, int64_t out, uint64_t seed);

/// A VNNLIB property text: the L∞ box of radius eps around `centre` (values in [0, 1] are not
/// clipped), with `outputs` outputs and the unsafe set "Y_0 >= Y_1" (a placeholder disjunct:
/// the bounds command ignores the output constraints).
std::string box_property(const std::vector<double>& centre, double eps, int64_t outputs);

}  // namespace distcrown::io
