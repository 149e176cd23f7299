#pragma once
// BoundNode: one operator of a BoundGraph. A node knows its own math only:
//   forward   concrete values,             inputs [batch, *in_shape_i] -> [batch, *shape]
//   ibp       intervals,                   same shapes, lower and upper
//   backward  maps linear bounds on its output (A [spec, batch, *shape]) to linear bounds on each
//             input (A_i [spec, batch, *in_shape_i]), adding constant terms to the bias [spec,
//             batch]
// What else a node is (affine, elementwise, splittable, ...) it declares in traits() (OpTraits).
// The methods (IBP, CROWN) walk the graph and call these; they never switch on node types.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/bounds/patches.hpp"
#include "distcrown/graph/param.hpp"

namespace distcrown {

/// A split at a point p of input `input` of a node: s·(z − p) ≤ 0 on the domain, so
/// min f ≥ min (f + β·s·z) − β·s·p. beta [rows, batch, *in_shape] is β·s (zero where the element
/// is not split), point [batch, *in_shape] is p where beta is not zero.
struct PointSplit {
  int input = 0;
  at::Tensor beta;
  at::Tensor point;
};

/// Optimisable relaxation parameters of one node in one backward pass (α-/β-CROWN); undefined =
/// CROWN's choice / none. α of a side is [spec, *P] where P = initial_relaxation_params(in)'s
/// shape: [batch, *shape] for one parameter per neuron (ReLU's lower slope), [k, batch, *shape]
/// for k per neuron (an S-shaped function's tangent points). β broadcasts against A.
struct RelaxParams {
  at::Tensor alpha_l;  // parameters of the rows of the lA side
  at::Tensor alpha_u;  // parameters of the rows of the uA side
  at::Tensor beta_l;   // β·s added to the input's lA: split multipliers times split signs
  at::Tensor beta_u;   // the same for uA (subtracted: max f − β·s·z)
  /// Splits at a point p of the node's inputs (OpTraits::splits_anywhere, splits_operands;
  /// CrownEngine applies them, not the node).
  std::vector<PointSplit> point_splits;
  /// α not yet read for this pass's rows (a hook may give it so, source_l and read_l both set,
  /// alpha_l undefined): alpha_l is read_l(source_l), alpha_u read_u(source_u). A source is the
  /// hook's storage, which autograd holds anyway; the rows read from it ([spec, *P], or each
  /// row's window) are as large as A. A node whose backward recomputes its step
  /// (OpTraits::reads_alpha_source) reads inside the step, so that autograd keeps the storage
  /// and not the copy; every other node gets resolved_alpha()'s.
  at::Tensor source_l;
  at::Tensor source_u;
  std::function<at::Tensor(const at::Tensor&)> read_l;
  std::function<at::Tensor(const at::Tensor&)> read_u;
};

/// α of both sides, already read (β none).
inline RelaxParams alpha_params(at::Tensor l, at::Tensor u) {
  RelaxParams p;
  p.alpha_l = std::move(l);
  p.alpha_u = std::move(u);
  return p;
}

/// `p` with alpha_l/alpha_u read from their sources (none: `p` as it is).
inline RelaxParams resolved_alpha(RelaxParams p) {
  if (p.source_l.defined()) p.alpha_l = p.read_l(p.source_l);
  if (p.source_u.defined()) p.alpha_u = p.read_u(p.source_u);
  p.source_l = at::Tensor();
  p.source_u = at::Tensor();
  p.read_l = nullptr;
  p.read_u = nullptr;
  return p;
}

/// Tensor parallelism: a node whose output holds only this rank's slice of the features (the last
/// dim) describes the slice, so that methods can bound the neurons of every rank consistently.
/// The ranks the features are split over are the graph's tensor-parallel group
/// (BoundGraph::tensor_parallel_group()).
struct OutputShard {
  int64_t offset = 0;  // first feature of this rank's slice
  int64_t width = 0;   // features held here: the node's shape is [batch, width]
  int64_t global = 0;  // features over all ranks
};

/// What an operator is, declared once by the operator (BoundNode::traits()) so that methods,
/// branch and bound and the sharding plans ask for a capability instead of matching op types.
struct OpTraits {
  /// The output is an affine function of the (single) bounded input: Linear, Conv, BatchNorm,
  /// reshapes, adding or scaling by constants. IBP through such nodes is exact up to the first
  /// two that mix elements.
  bool affine = false;
  /// An affine map that mixes elements (Linear, Conv).
  bool mixes_elements = false;
  /// Output element j depends on input element j only (same shape): ReLU, monotone functions,
  /// BatchNorm. Tensor-parallel zones may hold such nodes between their Col and Row.
  bool elementwise = false;
  /// y = x Wᵀ + b on the last dim, with params() = {W [out, in], b [out] (optional)}: the tensor
  /// parallel plan can split W by rows (BoundLinearTPCol) or columns (BoundLinearTPRow).
  bool dense_matrix = false;
  /// forward_surrogate's gradient is not forward's (a step function passed straight through): a
  /// search that follows it checks that each step helped.
  bool surrogate_gradient = false;
  /// The relaxation needs the bounds of the inputs (every nonlinearity).
  bool needs_input_bounds = false;
  /// The relaxation has optimisable parameters (α-CROWN's lower slopes, tangent points):
  /// initial_relaxation_params() gives CROWN's choice, project_relaxation_params() keeps them
  /// sound and backward_relaxed() applies RelaxParams.
  bool relaxation_params = false;
  /// The relaxation takes a reference point: backward() receives, after the input bounds, one
  /// entry per input holding its forward values at the centre of the input box (lower == upper,
  /// [batch, *in_shape]). Softmax's shift takes the maximum there, as auto_LiRPA's
  /// fixed_reducemax_index takes it from the forward pass.
  bool needs_centre_values = false;
  /// Branch and bound may split the node's input neurons at zero (x ≤ 0 | x ≥ 0), which makes
  /// the node exact on each side (ReLU). β multipliers enter through backward_relaxed().
  bool splittable = false;
  /// Branch and bound may split the node's (single, elementwise) input at any point p inside
  /// its interval (x ≤ p | x ≥ p): the relaxation, rebuilt on each side's narrower interval
  /// (backward() reads the input bounds it is given), is tighter (Sigmoid, Tanh, Exp, Sin, GELU,
  /// powers). The side is kept as the input's bounds and enters the bound as a β term
  /// (RelaxParams::point_splits; bab/split.hpp).
  bool splits_anywhere = false;
  /// Branch and bound may split either input of a product of two bounded tensors (Mul, MatMul)
  /// at any point inside an element's interval: the McCormick planes of every product term the
  /// element enters, rebuilt on the narrower interval, are tighter. Enters the bound as
  /// splits_anywhere's does (RelaxParams::point_splits, on that input).
  bool splits_operands = false;
  /// backward_patches() maps an A in patches form (bounds/patches.hpp) on the output to patches
  /// on every input (CROWN's conv_mode patches). Nodes without it get a dense A.
  bool patches = false;
  /// backward_relaxed() / backward_patches_relaxed() take α unread (RelaxParams::source_l/u,
  /// read_l/u) and read it inside their recomputed step.
  bool reads_alpha_source = false;
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
  /// forward's values with a gradient for a counterexample search to follow: forward itself,
  /// except where its gradient is 0 almost everywhere (Sign, Floor, Ceil), which pass the
  /// gradient straight through (as if the step were the identity).
  [[nodiscard]] virtual at::Tensor forward_surrogate(std::span<const at::Tensor> x) const {
    return forward(x);
  }
  [[nodiscard]] virtual Interval ibp(std::span<const Interval* const> x) const = 0;
  /// `bounds` holds the intervals of the inputs when needs_input_bounds(), else may be null
  /// entries; with traits().needs_centre_values the inputs' centre values follow (OpTraits).
  [[nodiscard]] virtual std::vector<BoundA> backward(const BoundA& a,
                                                     std::span<const Interval* const> bounds,
                                                     BiasPair& bias) const = 0;

  /// The operator's capabilities (OpTraits); its parameters (to cast, move and shard) are
  /// params().
  [[nodiscard]] virtual OpTraits traits() const { return {}; }
  [[nodiscard]] bool needs_input_bounds() const { return traits().needs_input_bounds; }
  [[nodiscard]] bool has_relaxation_params() const { return traits().relaxation_params; }
  /// CROWN's relaxation parameters for input bounds `in` ([batch, *shape]), the initial α:
  /// [batch, *shape] (one per neuron) or [k, batch, *shape].
  [[nodiscard]] virtual at::Tensor initial_relaxation_params(const Interval& in) const;
  /// Projects stored parameters `alpha` ([2, rows, *P], P as above; both sides, every row of a
  /// start) in place onto the set that is sound for the current input bounds `in`; called
  /// without autograd before every use, as auto_LiRPA clips its α. Default: [0, 1] (slopes).
  virtual void project_relaxation_params(at::Tensor& alpha, const Interval& in) const;
  /// A lower bound that every output value satisfies for every input, given such bounds of the
  /// inputs (NaN: none known), e.g. x² ≥ 0, a mean of values ≥ f is ≥ f. Lowerings read it
  /// (GraphBuilder::known_floor) to tell √ and 1/· domain facts that intermediate bounds, not
  /// intersected with IBP, may miss. Default: none.
  [[nodiscard]] virtual double known_floor(std::span<const double> /*input_floors*/) const {
    return std::numeric_limits<double>::quiet_NaN();
  }
  /// backward() with the given slopes and split multipliers.
  [[nodiscard]] virtual std::vector<BoundA> backward_relaxed(
      const BoundA& a, std::span<const Interval* const> bounds, BiasPair& bias,
      const RelaxParams& /*params*/) const {
    return backward(a, bounds, bias);
  }
  /// backward() for an A in patches form on a [C, H, W] output (traits().patches); the default
  /// throws (the method converts to dense for nodes without the trait).
  [[nodiscard]] virtual std::vector<PatchesA> backward_patches(
      const PatchesA& a, std::span<const Interval* const> bounds, BiasPair& bias) const;
  /// backward_patches() with parameters read at each row's window (RelaxationHook::
  /// window_params: α [r, batch, C, kh, kw]); for nodes with both relaxation_params and patches.
  /// The default throws.
  [[nodiscard]] virtual std::vector<PatchesA> backward_patches_relaxed(
      const PatchesA& a, std::span<const Interval* const> bounds, BiasPair& bias,
      const RelaxParams& params) const;
  [[nodiscard]] bool is_affine() const { return traits().affine; }
  [[nodiscard]] bool mixes_elements() const { return traits().mixes_elements; }
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
