#pragma once
// Recognises GELU (approximate = "none") in the nodes torch.onnx exports for it before opset 20 and
// replaces them by one Gelu node (opset 20 semantics), so that it is bounded as one function
// (ops/gelu.cpp, BoundGeluFn) instead of node by node (Erf, then a product by McCormick: 2.5–2.8×
// looser under CROWN).
#include "io/onnx_model.hpp"

namespace distcrown::io {

/// `model` with every exact match of
///   d = Div(x, √2) | Mul(x, 1/√2) | Mul(1/√2, x),  e = Erf(d),  a = Add(e, 1) | Add(1, e),
/// and then one of
///   y = Mul(Mul(x, a), 0.5)   (torch.onnx, TorchScript exporter)
///   y = Mul(x, Mul(0.5, a))   (onnxscript's aten_gelu)
///   y = Mul(Mul(x, 0.5), a)   (x * 0.5 * (1 + erf(x / √2)) written out)
/// (each Mul and Add in either operand order) replaced by one node y = Gelu(x) with
/// OnnxNode::opset = 20, where the final Mul was. A match is exact when: x depends on the graph's
/// variable input (other than through Shape) and is the same tensor in the Div/Mul and in the
/// outer product; the constants are one-element tensors of rank ≤ 1 (float32 or float64: an
/// initializer or a Constant node) equal to √2 (1/√2), 1 and 0.5 within 2⁻²⁴·|value| (their
/// float32 rounding); every intermediate tensor (d, e, a, the inner product) has exactly one use
/// and is not a graph output; no tensor name is defined twice. Anything else keeps its nodes. The
/// fused node computes x·Φ(x) with exact constants where the nodes use rounded ones: the two
/// differ by less than 1e-7·max(1, |x|), the order of float32 rounding of the nodes' own
/// arithmetic.
OnnxModel fuse_exported_gelu(OnnxModel model);

}  // namespace distcrown::io
