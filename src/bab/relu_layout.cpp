#include "relu_layout.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/sharding/partitioner.hpp"

namespace distcrown::bab::detail {
namespace {

at::Tensor constant_term(const BoundGraph& g, int node) {
  const GraphNode& n = g.node(node);
  const auto options = at::TensorOptions().dtype(g.dtype()).device(g.device());
  if (n.op && n.op->traits().affine) {
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> zeros;
    for (int p : n.inputs) zeros.push_back(at::zeros(g.node(p).shape, options));
    return n.op->forward(zeros).reshape({1, -1});
  }
  return at::zeros({1, g.node_numel(node)}, options);  // node shapes are this rank's under TP
}

}  // namespace

ReluLayout::ReluLayout(const BoundGraph& g) : g_(g) {
  // A node split anywhere whose input also feeds a ReLU is not split itself: the input's bounds
  // are the ReLU's entry (split at 0), and a second entry would keep them twice. So with a
  // product's operand: one entry per bounded tensor, the first node to read it keeps it.
  std::vector<int> relu_inputs;
  for (int i = 1; i < g.size(); ++i) {
    if (g.node(i).op && g.node(i).op->traits().splittable)
      relu_inputs.push_back(g.node(i).inputs.at(0));
  }
  const auto listed = [](const std::vector<int>& v, int p) {
    return std::find(v.begin(), v.end(), p) != v.end();
  };
  const auto free = [&](int in) { return !listed(relu_inputs, in) && !listed(pre_, in); };
  for (int i = 1; i < g.size(); ++i) {
    const GraphNode& n = g.node(i);
    const OpTraits t = n.op ? n.op->traits() : OpTraits{};
    const int in = n.inputs.empty() ? -1 : n.inputs.front();
    // ReLUs carry the split constraints (β) and their α through backward_relaxed(): both
    // capabilities are needed. A general node needs one elementwise input.
    const bool relu = t.splittable && t.relaxation_params;
    const bool general =
        !relu && t.splits_anywhere && t.elementwise && n.inputs.size() == 1 && free(in);
    if (relu || general) {
      add(i, 0, general, t.relaxation_params, false);
    } else if (t.splits_operands && n.inputs.size() == 2) {
      for (int k = 0; k < 2; ++k) {
        if (free(n.inputs[size_t(k)])) {
          add(i, k, true, false, true);
        } else {
          other_pre_.push_back(n.inputs[size_t(k)]);
        }
      }
    } else if (t.needs_input_bounds) {
      for (const int p : n.inputs) other_pre_.push_back(p);
    }
  }
  // A node that feeds a split node as well keeps the domain's own (split) bounds.
  std::erase_if(other_pre_, [&](int p) { return listed(pre_, p); });
}

void ReluLayout::add(int node, int input, bool general, bool alpha, bool operand) {
  const int in = g_.node(node).inputs.at(size_t(input));
  index_[node].push_back(relus_.size());
  if (!general) relu_index_[node] = relus_.size();
  relus_.push_back(node);
  input_.push_back(input);
  general_.push_back(general);
  alpha_.push_back(alpha);
  operand_.push_back(operand);
  pre_.push_back(in);
  const GraphNode& n = g_.node(in);
  const OutputShard* s = n.op ? n.op->output_shard() : nullptr;
  shards_.push_back(s != nullptr ? std::optional<OutputShard>(*s) : std::nullopt);
  bias_.push_back(constant_term(g_, in));
}

std::optional<size_t> ReluLayout::index_of(int node, int input) const {
  const auto it = index_.find(node);
  if (it == index_.end()) return std::nullopt;
  for (const size_t r : it->second) {
    if (input_[r] == input) return r;
  }
  return std::nullopt;
}

at::Tensor ReluLayout::local_part(const at::Tensor& t, size_t r) const {
  const std::optional<OutputShard>& s = shards_[r];
  return s ? t.narrow(-1, s->offset, s->width) : t;
}

at::Tensor ReluLayout::whole(const at::Tensor& t, size_t r) const {
  return whole({{t, r}}).front();
}

std::vector<at::Tensor> ReluLayout::whole(
    const std::vector<std::pair<at::Tensor, size_t>>& items) const {
  std::vector<at::Tensor> out(items.size());
  std::vector<size_t> sharded;
  for (size_t i = 0; i < items.size(); ++i) {
    if (shards_[items[i].second]) {
      sharded.push_back(i);
    } else {
      out[i] = items[i].first;
    }
  }
  if (sharded.empty()) return out;
  collective::Communicator& comm = *g_.tensor_parallel_group();
  const int P = comm.size();
  const auto per_of = [&](const OutputShard& s) { return (s.global + P - 1) / P; };
  // Each item's slice, neurons first and the rest flattened, [w_q, n], padded to ceil(global / P)
  // rows so that every rank's part has the same size; the items one after another in one buffer,
  // so that one AllGather serves them all; then each item's parts, each rank's width of its part.
  const at::ScalarType dtype = items[sharded.front()].first.scalar_type();
  const at::TensorOptions options = items[sharded.front()].first.options().dtype(dtype);
  std::vector<at::Tensor> pieces;
  std::vector<int64_t> cols;
  for (const size_t i : sharded) {
    const OutputShard& s = *shards_[items[i].second];
    const at::Tensor mine = items[i].first.detach().movedim(-1, 0).reshape({s.width, -1}).to(dtype);
    at::Tensor padded = at::zeros({per_of(s), mine.size(1)}, options);
    padded.narrow(0, 0, s.width).copy_(mine);
    cols.push_back(mine.size(1));
    pieces.push_back(padded.reshape({-1}));
  }
  const at::Tensor mine = at::cat(pieces);
  at::Tensor all = at::empty({P * mine.numel()}, options);
  comm.all_gather(mine, all);
  all = all.view({P, mine.numel()});
  int64_t offset = 0;
  for (size_t k = 0; k < sharded.size(); ++k) {
    const at::Tensor& t = items[sharded[k]].first;
    const OutputShard& s = *shards_[items[sharded[k]].second];
    const int64_t per = per_of(s);
    std::vector<at::Tensor> parts;
    parts.reserve(size_t(P));
    for (int q = 0; q < P; ++q) {
      parts.push_back(all[q]
                          .narrow(0, offset, per * cols[k])
                          .view({per, cols[k]})
                          .narrow(0, 0, sharding::balanced_split(s.global, P, q).width));
    }
    std::vector<int64_t> shape{s.global};  // [global, *t's dims but the last]
    shape.insert(shape.end(), t.sizes().begin(), t.sizes().end() - 1);
    out[sharded[k]] = at::cat(parts, 0).view(shape).movedim(0, -1).contiguous().to(t.scalar_type());
    offset += per * cols[k];
  }
  return out;
}

}  // namespace distcrown::bab::detail
