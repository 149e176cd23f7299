#pragma once
// Synthetic networks for benchmarks and tests: fully connected ReLU MLPs with seeded random
// weights (PyTorch's default Linear init: U(−1/√in, 1/√in) for weights and biases).
#include <cstdint>

#include "distcrown/graph/bound_graph.hpp"

namespace distcrown {

/// in -> [Linear(h) -> ReLU] x depth -> Linear(out); input shape [1, in].
BoundGraph make_random_mlp(int64_t in, int64_t hidden, int depth, int64_t out, uint64_t seed);

}  // namespace distcrown
