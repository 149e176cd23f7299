#pragma once
// GELU (exact, erf form) of a bounded tensor as one node (ops/gelu.cpp): a factory for tests that
// build graphs directly.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_gelu();

}  // namespace distcrown::ops
