#include "distcrown/sharding/partitioner.hpp"

#include <cstdio>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/util/error.hpp"
#include "ops/linear_tp.hpp"

namespace distcrown::sharding {
namespace {

bool is_linear_2d(const BoundGraph& g, int i) {
  const GraphNode& n = g.node(i);
  return n.op && n.op->traits().dense_matrix && n.shape.size() == 2 && n.inputs.size() == 1 &&
         g.node(n.inputs[0]).shape.size() == 2;
}

bool single_user(const BoundGraph& g, int i, int user) {
  const auto& users = g.node(i).users;
  return users.size() == 1 && users[0] == user && i != g.output();
}

// A Linear's weight [out, in] and bias [out] (undefined when absent).
std::pair<at::Tensor, at::Tensor> linear_params(GraphNode& n) {
  const std::vector<ParamPtr*> p = n.op->params();
  return {(*p.at(0))->get(), p.size() > 1 ? (*p[1])->get() : at::Tensor()};
}

}  // namespace

Split balanced_split(int64_t n, int P, int rank) {
  const int64_t base = n / P;
  const int64_t extra = n % P;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

TpPlan partition_tensor_parallel(BoundGraph& graph, const CommPtr& comm) {
  if (!comm) throw InvalidArgument("tensor parallelism needs a communicator");
  c10::NoGradGuard no_grad;
  TpPlan plan;
  plan.world = comm->size();
  const int P = comm->size();
  std::vector<bool> in_zone(size_t(graph.size()), false);
  for (int i = 1; i + 2 < graph.size(); ++i) {
    if (!is_linear_2d(graph, i) || !single_user(graph, i, i + 1)) continue;
    const GraphNode& relu = graph.node(i + 1);
    // Between the two: an elementwise operator without parameters (its relaxation is per
    // neuron, so it acts on this rank's slice as it is).
    if (!relu.op->traits().elementwise || !relu.op->params().empty() ||
        !single_user(graph, i + 1, i + 2)) {
      continue;
    }
    if (!is_linear_2d(graph, i + 2)) continue;
    const int64_t hidden = graph.node(i).shape[1];
    if (hidden < P) continue;  // every rank needs at least one neuron
    TpZone z{i, i + 1, i + 2, hidden, balanced_split(hidden, P, comm->rank())};
    const int64_t off = z.local.offset;
    const int64_t w = z.local.width;

    GraphNode& col = graph.node(i);
    auto [w1, b1] = linear_params(col);  // [hidden, in], [hidden]
    OutputShard shard{off, w, hidden};
    // clone(): the slices must own their storage so the full weights are freed here.
    col.op = ops::make_linear_tp_col(
        make_param(w1.narrow(0, off, w).clone()),
        b1.defined() ? make_param(b1.narrow(0, off, w).clone()) : nullptr, shard, comm);
    col.shape = {col.shape[0], w};
    col.op->bind_shapes({graph.node(col.inputs[0]).shape}, col.shape);

    GraphNode& act = graph.node(i + 1);
    act.shape = {act.shape[0], w};
    act.op->bind_shapes({col.shape}, act.shape);

    GraphNode& row = graph.node(i + 2);
    auto [w2, b2] = linear_params(row);  // [out, hidden], [out]
    row.op = ops::make_linear_tp_row(make_param(w2.narrow(1, off, w).clone()),
                                     b2.defined() ? make_param(b2) : nullptr, comm);
    row.op->bind_shapes({act.shape}, row.shape);

    for (int k = i; k <= i + 2; ++k) in_zone[size_t(k)] = true;
    plan.zones.push_back(z);
    i += 2;  // zones do not overlap
  }
  if (!plan.zones.empty()) graph.set_tensor_parallel_group(comm);
  for (int i = 1; i < graph.size(); ++i) {
    for (ParamPtr* p : graph.node(i).op->params()) {
      (in_zone[size_t(i)] ? plan.sharded_param_bytes : plan.replicated_param_bytes) +=
          (*p)->resident_bytes();
    }
  }
  return plan;
}

std::string describe(const TpPlan& plan, const BoundGraph& graph) {
  std::string s = "tensor-parallel plan over " + std::to_string(plan.world) +
                  " rank(s): " + std::to_string(plan.zones.size()) + " sharded zone(s)\n";
  char buf[256];
  for (size_t z = 0; z < plan.zones.size(); ++z) {
    const TpZone& t = plan.zones[z];
    std::snprintf(buf, sizeof buf, "  zone %zu: %s -> %s -> %s, %lld hidden neurons, %lld here\n",
                  z, graph.node(t.col).name.c_str(), graph.node(t.relu).name.c_str(),
                  graph.node(t.row).name.c_str(), static_cast<long long>(t.hidden),
                  static_cast<long long>(t.local.width));
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "  parameters here: %.3f MB sharded (zones), %.3f MB replicated (outside zones)\n",
                double(plan.sharded_param_bytes) / 1e6, double(plan.replicated_param_bytes) / 1e6);
  s += buf;
  return s;
}

}  // namespace distcrown::sharding
