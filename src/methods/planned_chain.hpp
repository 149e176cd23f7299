#pragma once
// A planned CROWN pass (issue 44) for what input splitting repeats every round: a graph that is a
// chain x -> affine -> ReLU -> affine -> ... -> ReLU -> affine (ACAS Xu, MLPs), bounded on a
// batch of boxes under IntermediateScheme::kTightUnstable. The plan is made once per search:
// each run of affine nodes composed into one dense W [out, in] and b [out] (the spec rows C
// folded into the last), and buffers that grow to the largest batch and are then reused. A pass
// is BLAS products (ATen's cpublas, no dispatcher) and one fused loop per ReLU step over every
// box's rows at once, without autograd or allocation in steady state.
//
// It computes what CrownEngine computes under that scheme (the reference path, which stays:
// `verify --passes reference`): an IBP reference per pre-activation layer; CROWN rows, both
// sides, for each box's own neurons unstable under it (no padding to the batch's most),
// intersected with it; the spec rows' CROWN lower bound, its coefficients at the input, and the
// spec rows' IBP bound. Sums run in another order than the reference's, so bounds agree to float
// rounding; a run of affine nodes with two that mix elements is composed before IBP, which is
// then tighter than node-by-node IBP (and as sound). A row's bits do not depend on the other rows
// or boxes of the batch: every product is at least 16 columns wide (zero padding), where MKL's
// rounding of a row is independent of the others (ops/linear.hpp).
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/util/deadline.hpp"

namespace distcrown {

/// A planned pass's bounds of B boxes and K spec rows, in the graph's dtype, on the CPU.
struct ChainBounds {
  at::Tensor crown_lower;  // [B, K] CROWN's lower bound of each row C_k·y over each box
  at::Tensor ibp_lower;    // [B, K] IBP's
  at::Tensor input_A;      // [B, K, n] CROWN's linear lower bound's coefficients at the input
};

class PlannedChain {
 public:
  PlannedChain() = default;
  PlannedChain(const PlannedChain&) = delete;
  PlannedChain& operator=(const PlannedChain&) = delete;
  PlannedChain(PlannedChain&&) = delete;
  PlannedChain& operator=(PlannedChain&&) = delete;
  virtual ~PlannedChain() = default;

  /// The plan of g's passes with spec rows C [K, m], or null with the reason in `why` when the
  /// planned path does not apply: a scheme other than kTightUnstable, not on the CPU, a dtype
  /// other than float32/float64, sharded or tensor-parallel parameters, or a graph that is not a
  /// chain of single-input affine nodes and ReLUs.
  static std::unique_ptr<PlannedChain> plan(const BoundGraph& g, const at::Tensor& C,
                                            const BoundOptions& options, std::string& why);

  /// Bounds the boxes [B, *input_shape] (the graph's dtype); calls `checkpoint` before each
  /// layer's rows.
  virtual ChainBounds bound(const InputBox& box, const Checkpoint& checkpoint) = 0;

  /// Floating-point operations of the products every bound() so far computed (2·m·n·k each,
  /// the padding left out): what the planned passes' arithmetic was.
  [[nodiscard]] int64_t flops() const { return flops_; }

 protected:
  int64_t flops_ = 0;
};

}  // namespace distcrown
