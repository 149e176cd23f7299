#pragma once
// BoundNode: one operator of a BoundGraph. A node knows its own math only:
//   forward   concrete values,             inputs [batch, *in_shape_i] -> [batch, *shape]
//   ibp       intervals,                   same shapes, lower and upper
//   backward  maps linear bounds on its output (A [spec, batch, *shape]) to linear bounds on each
//             input (A_i [spec, batch, *in_shape_i]), adding constant terms to the bias [spec,
//             batch]
// Nodes that relax a nonlinearity (ReLU) need bounds on their inputs: `needs_input_bounds()`.
// The methods (IBP, CROWN) walk the graph and call these; they never switch on node types.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/param.hpp"

namespace distcrown {

/// Optimisable relaxation parameters of one node in one backward pass (α-/β-CROWN). Each tensor
/// broadcasts against that side's A ([spec, batch, *shape]); undefined = CROWN's choice / none.
struct RelaxParams {
  at::Tensor alpha_l;  // lower-line slopes used where the lA side takes the lower line
  at::Tensor alpha_u;  // lower-line slopes used where the uA side takes the lower line
  at::Tensor beta_l;   // β·s added to the input's lA: split multipliers times split signs
  at::Tensor beta_u;   // the same for uA (subtracted: max f − β·s·z)
};

namespace dist {
class Communicator;
}  // namespace dist

/// Tensor parallelism: a node whose output holds only this rank's slice of the features (the last
/// dim) describes the slice, so that methods can bound the neurons of every rank consistently.
struct OutputShard {
  int64_t offset = 0;  // first feature of this rank's slice
  int64_t width = 0;   // features held here: the node's shape is [batch, width]
  int64_t global = 0;  // features over all ranks
  std::shared_ptr<dist::Communicator> comm;  // the ranks the features are split over
};

class BoundNode {
 public:
  virtual ~BoundNode() = default;
  BoundNode() = default;
  BoundNode(const BoundNode&) = delete;
  BoundNode& operator=(const BoundNode&) = delete;

  /// ONNX-like operator name, for messages ("Gemm", "Relu", ...).
  [[nodiscard]] virtual std::string op_type() const = 0;

  [[nodiscard]] virtual at::Tensor forward(std::span<const at::Tensor> x) const = 0;
  [[nodiscard]] virtual Interval ibp(std::span<const Interval* const> x) const = 0;
  /// `bounds` holds the intervals of the inputs when needs_input_bounds(), else may be null
  /// entries.
  [[nodiscard]] virtual std::vector<BoundA> backward(const BoundA& a,
                                                     std::span<const Interval* const> bounds,
                                                     BiasPair& bias) const = 0;

  [[nodiscard]] virtual bool needs_input_bounds() const { return false; }

  /// True for relaxations with optimisable lower slopes (ReLU): backward_relaxed applies
  /// RelaxParams and initial_slopes gives CROWN's choice of them.
  [[nodiscard]] virtual bool has_slopes() const { return false; }
  /// CROWN's lower-line slopes for input bounds `in` ([batch, *shape]): the initial α.
  [[nodiscard]] virtual at::Tensor initial_slopes(const Interval& in) const;
  /// backward() with the given slopes and split multipliers.
  [[nodiscard]] virtual std::vector<BoundA> backward_relaxed(
      const BoundA& a, std::span<const Interval* const> bounds, BiasPair& bias,
      const RelaxParams& /*params*/) const {
    return backward(a, bounds, bias);
  }
  /// True when the output is an affine function of the (single) bounded input.
  [[nodiscard]] virtual bool is_affine() const { return false; }
  /// True for affine maps that mix elements (Linear, Conv). IBP of a box through elementwise
  /// affine maps and at most one mixing map is exact; through two mixing maps it is not.
  [[nodiscard]] virtual bool mixes_elements() const { return false; }
  /// Non-null when the output is this rank's slice of a tensor-parallel layer (BoundLinearTPCol);
  /// null when every rank holds the whole output.
  [[nodiscard]] virtual const OutputShard* output_shard() const { return nullptr; }
  /// Parameters this node reads (for casting, sharding and memory accounting).
  [[nodiscard]] virtual std::vector<ParamPtr*> params() { return {}; }

  /// Called once by GraphBuilder with the inferred shapes (batch dim included, batch 1).
  void bind_shapes(std::vector<std::vector<int64_t>> inputs, std::vector<int64_t> output) {
    input_shapes_ = std::move(inputs);
    output_shape_ = std::move(output);
  }
  [[nodiscard]] const std::vector<int64_t>& input_shape(size_t i) const {
    return input_shapes_.at(i);
  }
  [[nodiscard]] const std::vector<int64_t>& output_shape() const { return output_shape_; }

 private:
  std::vector<std::vector<int64_t>> input_shapes_;
  std::vector<int64_t> output_shape_;
};

using NodePtr = std::unique_ptr<BoundNode>;

}  // namespace distcrown
