#include "distcrown/graph/bound_graph.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include "distcrown/util/error.hpp"

namespace distcrown {

std::vector<PatchesA> BoundNode::backward_patches(const PatchesA& /*a*/,
                                                  std::span<const Interval* const> /*bounds*/,
                                                  BiasPair& /*bias*/) const {
  throw Error("internal: " + op_type() + " has no patches backward");
}

std::vector<PatchesA> BoundNode::backward_patches_relaxed(
    const PatchesA& /*a*/, std::span<const Interval* const> /*bounds*/, BiasPair& /*bias*/,
    const RelaxParams& /*params*/) const {
  throw Error("internal: " + op_type() + " has no patches backward with relaxation parameters");
}

at::Tensor BoundNode::initial_relaxation_params(const Interval& /*in*/) const {
  throw Error("internal: operator " + op_type() + " has no optimisable relaxation parameters");
}

void BoundNode::project_relaxation_params(at::Tensor& alpha, const Interval& /*in*/) const {
  alpha.clamp_(0.0, 1.0);
}

namespace {
int64_t numel_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}
}  // namespace

int64_t BoundGraph::node_numel(int i) const {
  const auto& shape = node(i).shape;
  return numel_of(shape) / shape.front();
}
int64_t BoundGraph::activation_numel() const {
  int64_t n = 0;
  for (int i = 0; i < size(); ++i) n += node_numel(i);
  return std::max<int64_t>(n, 1);
}

int64_t BoundGraph::input_numel() const { return node_numel(0); }
int64_t BoundGraph::output_numel() const { return node_numel(output_); }

bool BoundGraph::is_pre_activation(int i) const {
  for (int u : node(i).users) {
    if (node(u).op->needs_input_bounds()) return true;
  }
  return false;
}

bool BoundGraph::feeds_splittable(int i) const {
  const auto& users = node(i).users;
  return !users.empty() && node(users.front()).op->traits().splittable;
}

at::Tensor BoundGraph::forward(const at::Tensor& x) const {
  return forward_values(x)[size_t(output_)];
}

std::vector<at::Tensor> BoundGraph::forward_values(const at::Tensor& x) const {
  return forward_values(x, false);
}

bool BoundGraph::has_surrogate_gradients() const {
  return std::any_of(nodes_.begin() + 1, nodes_.end(),
                     [](const GraphNode& n) { return n.op && n.op->traits().surrogate_gradient; });
}

at::Tensor BoundGraph::forward_surrogate(const at::Tensor& x) const {
  return forward_values(x, true)[size_t(output_)];
}

std::vector<at::Tensor> BoundGraph::forward_values(const at::Tensor& x, bool surrogate) const {
  std::vector<at::Tensor> values(nodes_.size());
  values[0] = x;
  std::vector<at::Tensor> args;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    args.clear();
    for (int p : nodes_[i].inputs) args.push_back(values[size_t(p)]);
    values[i] = surrogate ? nodes_[i].op->forward_surrogate(args) : nodes_[i].op->forward(args);
  }
  return values;
}

void BoundGraph::to_dtype(at::ScalarType dtype) {
  for (auto& n : nodes_) {
    if (!n.op) continue;
    for (ParamPtr* p : n.op->params()) (*p)->to_dtype(dtype);
  }
  dtype_ = dtype;
}

void BoundGraph::to_device(const at::Device& device) {
  if (device.is_cuda()) {
    // LibTorch lets cuDNN run float32 convolutions in TF32 (10-bit mantissa) by default. With
    // those defaults, on the H200, CROWN's bounds on cifar10_resnet_2b moved 9e-4 relative from
    // the CPU's (and auto_LiRPA's), where float32 rounding alone moves them ~1e-5: TF32's size
    // of error. Bounds are only as sound as their arithmetic, so every CUDA float32 convolution
    // and matmul runs in IEEE float32. Process-wide: LibTorch keeps these flags in its global
    // context.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  for (auto& n : nodes_) {
    if (!n.op) continue;
    for (ParamPtr* p : n.op->params()) (*p)->to_device(device);
  }
  device_ = device;
}

int64_t BoundGraph::param_bytes() const {
  int64_t total = 0;
  for (const auto& n : nodes_) {
    if (!n.op) continue;
    for (ParamPtr* p : n.op->params()) total += (*p)->resident_bytes();
  }
  return total;
}

int BoundGraph::add_node(GraphNode n) {
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

void BoundGraph::finalize() {
  if (output_ < 0 || output_ >= size()) throw ModelError("graph has no output node");
  // Keep only ancestors of the output (node 0, the input, is always kept).
  std::vector<bool> keep(nodes_.size(), false);
  keep[size_t(output_)] = true;
  for (int i = output_; i >= 0; --i) {
    if (!keep[size_t(i)]) continue;
    for (int p : nodes_[size_t(i)].inputs) keep[size_t(p)] = true;
  }
  keep[0] = true;
  std::vector<int> remap(nodes_.size(), -1);
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!keep[i]) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  for (auto& n : kept) {
    for (int& p : n.inputs) p = remap[size_t(p)];
    n.users.clear();
  }
  output_ = remap[size_t(output_)];
  nodes_ = std::move(kept);
  affine_from_input_.assign(nodes_.size(), false);
  affine_from_input_[0] = true;
  std::vector<int> mixing(nodes_.size(), 0);  // element-mixing maps between the input and i
  for (size_t i = 1; i < nodes_.size(); ++i) {
    for (int p : nodes_[i].inputs) nodes_[size_t(p)].users.push_back(static_cast<int>(i));
    const auto& n = nodes_[i];
    if (!n.op->is_affine() || n.inputs.size() != 1) continue;
    const auto parent = size_t(n.inputs[0]);
    mixing[i] = mixing[parent] + (n.op->mixes_elements() ? 1 : 0);
    affine_from_input_[i] = affine_from_input_[parent] && mixing[i] <= 1;
  }
}

GraphBuilder::GraphBuilder(std::vector<int64_t> input_shape, std::string input_name,
                           at::ScalarType dtype) {
  if (dtype != at::kFloat && dtype != at::kDouble) {
    throw InvalidArgument("a graph is float32 or float64");
  }
  graph_.dtype_ = dtype;
  for (int64_t d : input_shape) {
    if (d <= 0) throw ModelError("input '" + input_name + "' has a non-positive dimension");
  }
  samples_.push_back(at::zeros(input_shape, dtype));
  floors_.push_back(std::numeric_limits<double>::quiet_NaN());
  graph_.add_node(GraphNode{std::move(input_name), nullptr, {}, std::move(input_shape), {}});
}

int GraphBuilder::add(std::string name, NodePtr op, std::vector<int> inputs) {
  std::vector<at::Tensor> args;
  for (int p : inputs) {
    if (p < 0 || p >= graph_.size()) throw ModelError("node '" + name + "': bad input index");
    args.push_back(samples_[size_t(p)]);
  }
  at::Tensor out;
  try {
    out = op->forward(args);
  } catch (const c10::Error& e) {
    throw ModelError("node '" + name + "' (" + op->op_type() +
                     "): input shapes do not fit the operator: " + e.what_without_backtrace());
  }
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  std::vector<std::vector<int64_t>> in_shapes;
  in_shapes.reserve(args.size());
  for (const auto& a : args) in_shapes.emplace_back(a.sizes().begin(), a.sizes().end());
  op->bind_shapes(std::move(in_shapes), shape);
  samples_.push_back(out);
  std::vector<double> in_floors;
  in_floors.reserve(inputs.size());
  for (int p : inputs) in_floors.push_back(floors_[size_t(p)]);
  floors_.push_back(op->known_floor(in_floors));
  return graph_.add_node(GraphNode{std::move(name), std::move(op), std::move(inputs), shape, {}});
}

const std::vector<int64_t>& GraphBuilder::shape(int i) const { return graph_.node(i).shape; }

BoundGraph GraphBuilder::finish(int output) && {
  samples_.clear();
  graph_.set_output(output);
  graph_.finalize();
  return std::move(graph_);
}

}  // namespace distcrown
