#pragma once
// Sin and Cos of a bounded tensor (ops/trig.cpp): factories for tests that build graphs directly.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_sin();
NodePtr make_cos();

}  // namespace distcrown::ops
