#include "distcrown/sharding/sharded_param.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::sharding {

ShardedParam::ShardedParam(CommPtr comm, const at::Tensor& full)
    : comm_(std::move(comm)),
      shape_(full.sizes().begin(), full.sizes().end()),
      numel_(full.numel()) {
  const int64_t P = comm_->size();
  const int64_t per = (numel_ + P - 1) / P;
  const int64_t begin = std::min(numel_, per * comm_->rank());
  const int64_t end = std::min(numel_, begin + per);
  shard_ = at::zeros({per}, full.options());
  if (end > begin) shard_.slice(0, 0, end - begin).copy_(full.reshape({-1}).slice(0, begin, end));
}

at::Tensor ShardedParam::get() const {
  c10::NoGradGuard no_grad;
  at::Tensor buffer = at::empty({shard_.numel() * comm_->size()}, shard_.options());
  comm_->all_gather(shard_, buffer);
  // The prefix of the padded buffer is the parameter, contiguous, sharing the buffer's storage.
  return buffer.slice(0, 0, numel_).view(shape_);
}

int64_t ShardedParam::resident_bytes() const {
  return shard_.numel() * int64_t(shard_.element_size());
}

void ShardedParam::to_dtype(at::ScalarType dtype) {
  if (shard_.is_floating_point()) shard_ = shard_.to(dtype);
}

void ShardedParam::to_device(const at::Device& device) { shard_ = shard_.to(device); }

ShardPlan parse_shard_plan(const std::string& name) {
  return parse_enum<ShardPlan>(name, "shard plan");
}

std::string to_string(ShardPlan plan) { return std::string(enum_name(plan)); }

void shard_graph(BoundGraph& graph, ShardPlan plan, const CommPtr& comm) {
  if (plan == ShardPlan::kNone) return;
  if (is_tensor_parallel(plan)) {
    partition_tensor_parallel(graph, comm);
    return;
  }
  c10::NoGradGuard no_grad;
  for (int i = 1; i < graph.size(); ++i) {
    for (ParamPtr* p : graph.node(i).op->params()) {
      *p = std::make_shared<ShardedParam>(comm, (*p)->get());
    }
  }
}

int64_t largest_param_bytes(const BoundGraph& graph) {
  int64_t best = 0;
  for (int i = 1; i < graph.size(); ++i) {
    for (ParamPtr* p : graph.node(i).op->params()) {
      best = std::max(best, (*p)->numel() * int64_t(at::elementSize(graph.dtype())));
    }
  }
  return best;
}

}  // namespace distcrown::sharding
