#pragma once
// S-shaped elementwise functions with auto_LiRPA's BoundTanh relaxation (ops/s_shaped.cpp).
// Factories for lowerings that compose them (Gelu) and for tests that build graphs directly.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

NodePtr make_sigmoid();
NodePtr make_tanh();
NodePtr make_erf();

}  // namespace distcrown::ops
