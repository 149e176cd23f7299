#pragma once
// BoundGraph: the nodes of a network in topological order. Node 0 is the (single) perturbed input;
// every other node depends on it (constants are folded into operator parameters at load time).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_node.hpp"

namespace distcrown {

struct GraphNode {
  std::string name;            // ONNX output name, for messages
  NodePtr op;                  // null for the input node
  std::vector<int> inputs;     // producer indices (< own index)
  std::vector<int64_t> shape;  // output shape including the batch dim (batch 1 at build time)
  std::vector<int> users;      // consumer indices, filled by finalize()
};

class BoundGraph {
 public:
  BoundGraph() = default;
  BoundGraph(BoundGraph&&) = default;
  BoundGraph& operator=(BoundGraph&&) = default;

  [[nodiscard]] int size() const { return static_cast<int>(nodes_.size()); }
  [[nodiscard]] const GraphNode& node(int i) const { return nodes_.at(static_cast<size_t>(i)); }
  [[nodiscard]] GraphNode& node(int i) { return nodes_.at(static_cast<size_t>(i)); }
  [[nodiscard]] int output() const { return output_; }
  [[nodiscard]] const std::vector<int64_t>& input_shape() const { return nodes_.front().shape; }
  [[nodiscard]] const std::vector<int64_t>& output_shape() const { return node(output_).shape; }
  [[nodiscard]] int64_t input_numel() const;
  [[nodiscard]] int64_t output_numel() const;
  /// Elements of node i per batch element (its shape without the batch dim).
  [[nodiscard]] int64_t node_numel(int i) const;
  /// The elements of every node's value for one input, summed (at least 1): what one forward
  /// pass of a sample holds, for sizing batches of points or boxes.
  [[nodiscard]] int64_t activation_numel() const;
  [[nodiscard]] at::ScalarType dtype() const { return dtype_; }

  /// True when some consumer of node i relaxes a nonlinearity and so needs bounds on i.
  [[nodiscard]] bool is_pre_activation(int i) const;
  /// True when node i feeds a splittable nonlinearity (ReLU) first: its neurons stable under a
  /// reference interval are exact there, so CROWN rows are needed only for the unstable ones
  /// (auto_LiRPA's sparse intermediate bounds, which it applies before a ReLU only).
  [[nodiscard]] bool feeds_splittable(int i) const;
  /// True when IBP is exact at node i: it is an affine function of the input through
  /// single-input affine nodes, at most one of which mixes elements (Linear/Conv).
  [[nodiscard]] bool affine_from_input(int i) const { return affine_from_input_.at(size_t(i)); }

  /// Concrete forward pass; x is [batch, *input_shape]. Returns the output [batch, *output_shape].
  [[nodiscard]] at::Tensor forward(const at::Tensor& x) const;
  /// forward's output by every node's forward_surrogate: the same values, with gradients through
  /// step functions (for the attack).
  [[nodiscard]] at::Tensor forward_surrogate(const at::Tensor& x) const;
  /// Whether some node's forward_surrogate has another gradient than its forward
  /// (OpTraits::surrogate_gradient).
  [[nodiscard]] bool has_surrogate_gradients() const;
  /// The forward values of every node ([batch, *shape] each, index = node) for input x.
  [[nodiscard]] std::vector<at::Tensor> forward_values(const at::Tensor& x) const;

  /// Casts every parameter (float32 <-> float64).
  void to_dtype(at::ScalarType dtype);
  /// Moves every parameter to `device`. To CUDA, it also turns LibTorch's TF32 off for cuDNN
  /// and cuBLAS (process-wide): TF32's 10-bit mantissa moves bounds by ~1e-3 relative.
  void to_device(const at::Device& device);
  [[nodiscard]] at::Device device() const { return device_; }

  /// The ranks that tensor-parallel nodes (BoundNode::output_shard()) split their features
  /// over; null unless sharding::partition_tensor_parallel rewrote the graph.
  [[nodiscard]] const collective::CommPtr& tensor_parallel_group() const { return tp_group_; }
  void set_tensor_parallel_group(collective::CommPtr group) { tp_group_ = std::move(group); }

  /// Bytes of parameters held by this process.
  [[nodiscard]] int64_t param_bytes() const;

  // Construction (used by GraphBuilder).
  int add_node(GraphNode n);
  void set_output(int i) { output_ = i; }
  /// Drops nodes that do not lead to the output, fills users and derived flags.
  void finalize();

 private:
  [[nodiscard]] std::vector<at::Tensor> forward_values(const at::Tensor& x, bool surrogate) const;
  friend class GraphBuilder;  // sets the dtype the parameters were built in
  std::vector<GraphNode> nodes_;
  std::vector<bool> affine_from_input_;
  int output_ = -1;
  at::ScalarType dtype_ = at::kFloat;
  at::Device device_ = at::kCPU;
  collective::CommPtr tp_group_;
};

/// Builds a BoundGraph node by node, inferring each node's shape by a forward pass on zeros so a
/// malformed operator fails here, with its name, instead of during bounding.
class GraphBuilder {
 public:
  /// Starts a graph whose input has the given shape (batch dim included) and whose parameters
  /// and input are `dtype` (float32 or float64).
  explicit GraphBuilder(std::vector<int64_t> input_shape, std::string input_name = "input",
                        at::ScalarType dtype = at::kFloat);

  /// Adds an operator fed by the given node indices; returns its index. Throws ModelError
  /// ("node 'name' (Op): ...") when the operator rejects its input shapes.
  int add(std::string name, NodePtr op, std::vector<int> inputs);

  [[nodiscard]] const std::vector<int64_t>& shape(int i) const;
  /// A lower bound of every value of node i for every input (BoundNode::known_floor along the
  /// graph); NaN when none is known.
  [[nodiscard]] double known_floor(int i) const { return floors_.at(size_t(i)); }
  [[nodiscard]] int input() const { return 0; }

  /// Finishes the graph with node `output` as its output.
  BoundGraph finish(int output) &&;

 private:
  BoundGraph graph_;
  std::vector<at::Tensor> samples_;  // forward values on a zero input, for shape inference
  std::vector<double> floors_;       // known_floor of each node
};

}  // namespace distcrown
