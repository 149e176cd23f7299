#include "distcrown/collective/autograd.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace distcrown::collective {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The communicator travels to the backward in the context's saved data as a capsule.
struct CommHolder final : torch::CustomClassHolder {
  explicit CommHolder(CommPtr c) : comm(std::move(c)) {}
  CommPtr comm;
};

void save_comm(AutogradContext* ctx, const CommPtr& comm) {
  ctx->saved_data["comm"] = c10::IValue::make_capsule(c10::make_intrusive<CommHolder>(comm));
}

CommPtr saved_comm(AutogradContext* ctx) {
  const auto capsule = ctx->saved_data["comm"].toCapsule();
  return static_cast<CommHolder*>(capsule.get())->comm;
}

at::Tensor all_reduced(const at::Tensor& x, Communicator& comm) {
  at::Tensor t = x.contiguous().clone();
  comm.all_reduce(t, ReduceOp::kSum);
  return t;
}

struct CopyToShards : torch::autograd::Function<CopyToShards> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const CommPtr& comm) {
    save_comm(ctx, comm);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_reduced(grad[0], *saved_comm(ctx)), at::Tensor()};
  }
};

struct ReduceFromShards : torch::autograd::Function<ReduceFromShards> {
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& x, const CommPtr& comm) {
    return all_reduced(x, *comm);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grad) {
    return {grad[0], at::Tensor()};
  }
};

struct GatherFromRanks : torch::autograd::Function<GatherFromRanks> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const CommPtr& comm) {
    save_comm(ctx, comm);
    const at::Tensor in = x.contiguous();
    std::vector<int64_t> shape = in.sizes().vec();
    shape.at(0) *= comm->size();
    at::Tensor out = at::empty(shape, in.options());
    comm->all_gather(in, out);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const CommPtr comm = saved_comm(ctx);
    const at::Tensor g = grad[0].contiguous();  // [P·n, *]
    std::vector<int64_t> shape = g.sizes().vec();
    shape.at(0) /= comm->size();
    at::Tensor mine = at::empty(shape, g.options());
    comm->reduce_scatter(g, mine, ReduceOp::kSum);
    return {mine, at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_shards(const at::Tensor& x, const CommPtr& comm) {
  return CopyToShards::apply(x, comm);
}

at::Tensor reduce_from_shards(const at::Tensor& x, const CommPtr& comm) {
  return ReduceFromShards::apply(x, comm);
}

at::Tensor gather_from_ranks(const at::Tensor& x, const CommPtr& comm) {
  return GatherFromRanks::apply(x, comm);
}

at::Tensor BackwardOrder::tie(const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return x;
  if (!last_.defined()) last_ = at::zeros({0}, x.options()).requires_grad_(true);
  // Σ over no elements is +0 exactly: x's values are unchanged (a −0 becomes +0).
  return x + last_.sum().to(x.scalar_type());
}

void BackwardOrder::link(const at::Tensor& out) {
  if (at::GradMode::is_enabled()) last_ = out.flatten().narrow(0, 0, 0);
}

}  // namespace distcrown::collective
