#pragma once
// The registry of every built-in operator (ONNX op type and opset range -> lowering), assembled
// here, in the ops layer, from the operator families below it; the loader (io/) reads it.
#include "graph/op_registry.hpp"

namespace distcrown::ops {

/// Built once, read-only afterwards.
const OpRegistry& builtin_ops();

}  // namespace distcrown::ops
