#pragma once
// β-CROWN's planned passes (issue 44): what ReLU splitting repeats every round on a graph that is a
// chain x -> affine -> ReLU -> ... -> ReLU -> affine (mnist_fc, ERAN's MLPs), on the CPU, with
// each domain's intermediate bounds fixed. The plan is made once per search (each run of affine
// nodes composed into one dense W and b, the spec rows C folded into the last); a batch of B
// domains and K rows is loaded once per round into buffers that grow to the largest batch; then
// each pass is one BLAS product and one fused loop per layer, and each optimisation step the
// gradient of the pass's bounds with respect to α and β in closed form (the same products with
// Wᵀ, one fused loop per layer) followed by Adam on the entries that can move: α where a neuron is
// unstable, β where it is split (the others have a zero gradient in every pass, so Adam leaves
// them as they are). No dispatcher, autograd or allocation on the hot path.
//
// A pass computes what CrownEngine with bab/relu_bounding.cpp's SplitHook computes (the
// reference path, `verify --passes reference`): for each row k of C and domain b, the lower bound
// of C_k·y over the box given each ReLU input's bounds, lower line slope α where unstable (CROWN's
// 0/1 where stable), the chord above, and β·s added to the coefficients of each ReLU's input
// (s = +1 split below, −1 above). A row's bits do not depend on the other rows of the pass: every
// product is at least 16 columns wide.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"

namespace distcrown {

/// One round's domains as the passes read them, in the graph's dtype: per ReLU j (in graph
/// order) the bounds of its input and the split marks [B, n_j], α and β [K, B, n_j].
struct SplitBatchView {
  int64_t B = 0;
  const std::vector<at::Tensor>* lower = nullptr;
  const std::vector<at::Tensor>* upper = nullptr;
  const std::vector<at::Tensor>* split = nullptr;
  const std::vector<at::Tensor>* alpha = nullptr;
  const std::vector<at::Tensor>* beta = nullptr;
};

class PlannedBeta {
 public:
  PlannedBeta() = default;
  PlannedBeta(const PlannedBeta&) = delete;
  PlannedBeta& operator=(const PlannedBeta&) = delete;
  PlannedBeta(PlannedBeta&&) = delete;
  PlannedBeta& operator=(PlannedBeta&&) = delete;
  virtual ~PlannedBeta() = default;

  /// The plan of g's passes with spec rows C [K, m] over `box` ([1, *input_shape]), or null with
  /// the reason in `why`: not on the CPU, a dtype other than float32/float64, sharded or
  /// tensor-parallel parameters, a graph that is not a chain of single-input affine nodes and
  /// ReLUs, or one whose composed matrices would hold more than twice its parameters (convolutions
  /// made dense cost more than they save; refused before any is made).
  static std::unique_ptr<PlannedBeta> plan(const BoundGraph& g, const at::Tensor& C,
                                           const InputBox& box, std::string& why);

  /// Loads a batch (copies; Adam's moments and step count start again). Without `optimise` the
  /// batch is only bounded (step() refused, movable() false): FSB's trial children.
  virtual void load(const SplitBatchView& batch, bool optimise) = 0;
  /// One pass over the loaded domains `active` (positions, increasing): their rows' lower bounds
  /// [active, K] in the graph's dtype. `record`: keep the coefficients at each ReLU's output and
  /// at the input for relu_A() and input_A().
  virtual at::Tensor pass(const std::vector<int64_t>& active, bool record) = 0;
  /// One Adam step of α (learning rate lr_alpha, kept in [0, 1]) and β (lr_beta, kept >= 0)
  /// toward larger bounds, on the last pass's domains, from the gradient of the sum of its bounds.
  virtual void step(double lr_alpha, double lr_beta) = 0;
  /// The loaded batch's α and β as they are now, [K, B, n_j] per ReLU.
  virtual void alpha_beta(std::vector<at::Tensor>& alpha, std::vector<at::Tensor>& beta) const = 0;
  /// The last recorded pass's coefficients at ReLU j's output, [K, B, n_j] (zeros for domains it
  /// did not bound), and at the input, [K, B, n_0].
  [[nodiscard]] virtual at::Tensor relu_A(size_t j) const = 0;
  [[nodiscard]] virtual at::Tensor input_A() const = 0;

  /// The chain's ReLU nodes, input to output: ReLU j of the batch's vectors is relus()[j].
  [[nodiscard]] const std::vector<int>& relus() const { return relus_; }
  /// Whether the loaded batch has an entry α or β can move (an unstable or a split neuron).
  [[nodiscard]] virtual bool movable() const = 0;

  /// Floating-point operations of the products so far (2·m·n·k each, the padding left out).
  [[nodiscard]] int64_t flops() const { return flops_; }

 protected:
  int64_t flops_ = 0;
  std::vector<int> relus_;
};

}  // namespace distcrown
