#include "distcrown/bab/relu_bab.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/bab/branching.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/adam.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/tensor_values.hpp"
#include "domain.hpp"

namespace distcrown::bab {
namespace {

using detail::Domain;
using detail::Planned;
using detail::RoundReport;
using detail::worse_first;

InputBox on_device(const InputBox& b, const at::Device& device) {
  return {b.lower.to(device), b.upper.to(device)};
}

BoundOptions without_row_alignment(BoundOptions o) {
  o.align_rows = false;
  return o;
}

// The bounding passes of a branch and bound stop at its deadline and print its progress.
BoundOptions with_checkpoint(BoundOptions o, const Deadline& deadline, Progress& progress) {
  o.checkpoint = Checkpoint{deadline, &progress};
  return o;
}

// BaBSR's bias term of the node feeding a ReLU ([1, N]; this rank's neurons under TP): an
// affine node's output on zero inputs, its constant term as a function of its own inputs (a
// Linear's or Conv's bias, BatchNorm's shift); zeros for any other node. Every rank of a group
// constructs its ReluBab together, so the weights FSDP gathers in forward() are gathered by all.
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

// Relaxation parameters of one batch: α and β·s per ReLU, and what the last pass saw.
class SplitHook final : public RelaxationHook {
 public:
  SplitHook(int output, std::map<int, size_t> relu_index)
      : output_(output), relu_index_(std::move(relu_index)) {}

  RelaxParams params(int start, int node, const at::Tensor& rows,
                     std::span<const Interval* const> /*in*/) override {
    if (start != output_) throw Error("internal: BaB pass from an intermediate node");
    // Nodes that are not split (an S-shaped activation) keep CROWN's relaxation in BaB passes.
    const auto it = relu_index_.find(node);
    if (it == relu_index_.end()) return {};
    const size_t r = it->second;
    // α unread: the ReLU step selects the rows inside its recomputed step, so that autograd
    // keeps alpha[r] (held anyway) rather than an A-sized copy.
    RelaxParams p;
    p.beta_l = beta_signed[r].index_select(0, rows);
    p.source_l = alpha[r];
    p.read_l = [rows](const at::Tensor& a) { return a.index_select(0, rows); };
    return p;
  }

  void observe(int start, int node, const BoundA& a) override {
    if (!record || start != output_) return;
    if (node == 0) {
      input_A = a.lA.detach();
    } else if (const auto it = relu_index_.find(node); it != relu_index_.end()) {
      relu_A[it->second] = a.lA.detach();
    }
  }

  std::vector<at::Tensor> alpha;        // [K, B, *shape]
  std::vector<at::Tensor> beta_signed;  // [K, B, *shape]
  bool record = false;
  std::vector<at::Tensor> relu_A;  // A at each ReLU's output in the recorded pass [K', B, *shape]
  at::Tensor input_A;              // [K', B, *input_shape]

 private:
  int output_;
  std::map<int, size_t> relu_index_;
};

class ReluBab {
 public:
  ReluBab(const BoundGraph& g, const io::VnnlibCase& c, const Objective& obj,
          const std::vector<Objective>& disjuncts, const BabOptions& o, const Deadline& deadline,
          const BoundOptions& bo)
      : g_(g),
        case_(c),
        obj_(obj),
        disjuncts_(disjuncts),
        o_(o),
        deadline_(deadline),
        own_progress_(o.progress, deadline, g.device()),
        progress_(o.reporter != nullptr ? *o.reporter : own_progress_),
        bo_(with_checkpoint(without_row_alignment(bo), deadline, progress_)),
        box_(on_device(io::enclosing_box(c, g, g.dtype()), g.device())) {
    for (int i = 1; i < g.size(); ++i) {
      // Splittable nodes (ReLU) carry the split constraints (β) and their α through
      // backward_relaxed(): both capabilities are needed.
      const OpTraits t = g.node(i).op ? g.node(i).op->traits() : OpTraits{};
      if (t.splittable && t.relaxation_params) {
        relu_index_[i] = relus_.size();
        relus_.push_back(i);
        pre_.push_back(g.node(i).inputs.at(0));
        const GraphNode& in = g.node(pre_.back());
        const OutputShard* s = in.op ? in.op->output_shard() : nullptr;
        shards_.push_back(s != nullptr ? std::optional<OutputShard>(*s) : std::nullopt);
        bias_.push_back(constant_term(g, pre_.back()));
      } else if (t.needs_input_bounds) {
        for (const int p : g.node(i).inputs) other_pre_.push_back(p);
      }
    }
    // A node that feeds a ReLU as well keeps the domain's own (split) bounds.
    std::erase_if(other_pre_,
                  [&](int p) { return std::find(pre_.begin(), pre_.end(), p) != pre_.end(); });
    K_ = obj.rhs.size(0);
    if (o.spec_parallel && o.world.group && o.world.group->size() > 1) {
      if (std::string why = spec_parallel_refusal(o); !why.empty()) throw InvalidArgument(why);
      if (g.tensor_parallel_group()) {
        throw InvalidArgument(
            "spec-parallel branch and bound gives the ranks of a group different domains, but "
            "tensor-parallel layers need every rank of the group in the same passes");
      }
      share_ = o.world.group;
      // Each rank keeps the domains it bounded: the round's plan is made over ranks (one-rank
      // units, which need no communicator of their own).
      units_ = BabWorld{o.world.world, nullptr, o.world.world_size()};
    }
  }

  /// Branch and bound until decided, out of rounds, or past the deadline (kTimeout, also when
  /// a bounding pass stopped at it), starting from `start` (or α-CROWN at the root when null).
  BabResult run(ReluBabStats* stats, const RootStart* start);

  struct Bounded {
    at::Tensor values;   // [B]
    at::Tensor lower;    // [B, K]
    at::Tensor input_A;  // [K, B, *input_shape] or undefined
    bool recorded = false;
  };
  /// Bounds the batch `ds`: alone, or under spec-parallel this rank's own domains in the same
  /// passes as its group's other ranks (bound_here on the group's largest count, padded with
  /// copies), each rank's results its own. Collective over the group under spec-parallel.
  Bounded bound(std::vector<Domain>& ds, int iterations, bool optimise);
  /// `real`: the first positions that are domains of the search; the rest pad a spec-parallel
  /// share and do not keep the optimisation going.
  Bounded bound_here(std::vector<Domain>& ds, int iterations, bool optimise,
                     std::optional<int64_t> real = std::nullopt);
  /// Writes a bounded batch into its domains: each value (floored at the parent's when
  /// `optimise`; FSB's trial values stay unfloored, they rank candidate splits against each
  /// other), α and β ([K, B, *shape] per ReLU) and scores ([B, 2, N_all], or undefined).
  void store(std::vector<Domain>& ds, const at::Tensor& values,
             const std::vector<at::Tensor>& alpha, const std::vector<at::Tensor>& beta,
             const at::Tensor& scores, bool optimise) const;
  /// The root with CROWN intermediate bounds (no α optimisation) and the given splits applied.
  Domain crown_root_with(const std::vector<NeuronSplit>& splits);

 private:
  Domain root(const RootStart* start);
  /// A domain without splits over the given bounds of each ReLU's input, with the output
  /// start's α where given (ReLU node -> [K, 1, *shape]), else CROWN's slopes; β = 0. Bounds and
  /// α as the passes give them: this rank's neurons under TP.
  Domain make_root(const std::vector<Interval>& bounds,
                   const std::map<int, at::Tensor>& output_alpha);
  std::vector<std::pair<size_t, int64_t>> choose(const std::vector<Domain>& parents, int64_t batch);
  Domain child(const Domain& parent, size_t r, int64_t j, bool active, int64_t id);
  /// Checks the box corners that minimise each open domain's linear lower bounds; with
  /// `pgd_round` (a round number) also runs PGD from them and from fresh random points. With
  /// `shared`, `ds` are this rank's share of its group's domains: the corners of every rank's
  /// are gathered in id order (one process's order), and each rank attacks them all in step.
  std::optional<Counterexample> attack_from(const std::vector<Domain>& ds, const Bounded& b,
                                            std::optional<int64_t> pgd_round, bool shared);
  DomainStoreBytes store_bytes(const std::vector<Domain>& queue) const;

  const BoundGraph& g_;
  const io::VnnlibCase& case_;
  const Objective& obj_;
  const std::vector<Objective>& disjuncts_;
  BabOptions o_;
  const Deadline& deadline_;
  Progress own_progress_;
  Progress& progress_;  // o_.reporter or own_progress_
  BoundOptions bo_;     // its checkpoint: deadline_ and progress_
  InputBox box_;        // [1, *input_shape]
  BabResult res_;
  BabResult search(ReluBabStats* stats, const RootStart* start);
  /// This rank's cap on the next round's batch under the memory limit (BabOptions::batch's
  /// units), after a round planned with `last_batch`; sets mine.memory_full (with the live
  /// bytes and the limit) when not even one domain fits, or, deterministic, the fixed batch.
  void cap_batch(RoundReport& mine, int64_t last_batch, int64_t queued) const;
  /// Spec-parallel: the largest `n` over the group's ranks (every rank calls it in step).
  [[nodiscard]] int64_t group_max(int64_t n) const;
  /// Spec-parallel: the tally's counts per rank (the round's holders) summed per group, and
  /// the rank that found a counterexample as its group.
  void per_group_of_ranks(BabResult& res) const;
  /// Tensor parallelism: ReLU r's neurons as the bounding passes see them (this rank's slice of
  /// the last dim, [..., width]), and as domains keep them (every neuron, [..., global]; the same
  /// on every rank, so the queue, the branching and the exchange between groups are one
  /// process's). Both return `t` for a ReLU outside the zones.
  [[nodiscard]] at::Tensor local_part(const at::Tensor& t, size_t r) const;
  [[nodiscard]] at::Tensor whole(const at::Tensor& t, size_t r) const;
  /// whole() of many tensors (each with its ReLU) in one AllGather.
  [[nodiscard]] std::vector<at::Tensor> whole(
      const std::vector<std::pair<at::Tensor, size_t>>& items) const;
  collective::CommPtr share_;  // the group's ranks that split each batch; null: none
  /// Who holds domains in the round exchange: the groups, or under spec-parallel each rank
  /// (its own queue of the domains it bounded; the plan balances the batch over the ranks).
  BabWorld units_ = o_.world;
  /// Spec-parallel: a domain of the model's shapes (the root) that pads a rank's share when it
  /// has none of its own.
  std::optional<Domain> spare_;
  std::vector<std::optional<OutputShard>> shards_;  // per ReLU: its input's slice under TP
  std::vector<int> relus_, pre_;
  std::vector<int> other_pre_;  // inputs of relaxed nodes that are not split (MaxPool, Sigmoid)
  std::map<int, size_t> relu_index_;
  std::vector<at::Tensor> bias_;  // per ReLU: constant_term() of its input node, [1, N local]
  int64_t K_ = 0;
  int64_t bounded_ = 0;
  /// Tensor bytes one parent's part of a round cost at its peak (its two children, FSB's
  /// trials, the bounding passes, the attack), the largest over the last rounds with parents
  /// (attack_every of them, so that a round with a PGD attack is among them); 0: not yet.
  double per_parent_bytes_ = 0;
  std::deque<double> per_parent_seen_;
};

at::Tensor cat_dim(const std::vector<Domain>& ds, std::vector<at::Tensor> Domain::*field, size_t r,
                   int64_t dim) {
  std::vector<at::Tensor> parts;
  parts.reserve(ds.size());
  for (const Domain& d : ds) parts.push_back((d.*field)[r]);
  return at::cat(parts, dim);
}

// Index of the first ReLU with a split in any domain of the batch (split[r]: [B, *shape]);
// the number of ReLUs when none has one.
size_t earliest_split(const std::vector<at::Tensor>& split) {
  for (size_t r = 0; r < split.size(); ++r) {
    if (split[r].ne(0).any().item<bool>()) return r;
  }
  return split.size();
}

at::Tensor ReluBab::local_part(const at::Tensor& t, size_t r) const {
  const std::optional<OutputShard>& s = shards_[r];
  return s ? t.narrow(-1, s->offset, s->width) : t;
}

at::Tensor ReluBab::whole(const at::Tensor& t, size_t r) const { return whole({{t, r}}).front(); }

std::vector<at::Tensor> ReluBab::whole(
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

int64_t ReluBab::group_max(int64_t n) const {
  at::Tensor t = at::full({1}, n, at::TensorOptions().dtype(at::kLong).device(g_.device()));
  share_->all_reduce(t, collective::ReduceOp::kMax);
  return t.item<int64_t>();
}

void ReluBab::per_group_of_ranks(BabResult& res) const {
  const int size = o_.world.group_size();
  std::vector<int64_t> per_group(size_t(o_.world.groups), 0);
  for (size_t r = 0; r < res.domains_per_group.size(); ++r) {
    per_group[r / size_t(size)] += res.domains_per_group[r];
  }
  res.domains_per_group = std::move(per_group);
  if (res.counterexample_group >= 0) res.counterexample_group /= size;
}

ReluBab::Bounded ReluBab::bound(std::vector<Domain>& ds, int iterations, bool optimise) {
  if (!share_) return bound_here(ds, iterations, optimise);
  // Every rank of the group bounds `per` domains in the same passes (FSDP gathers the weights
  // inside them; the optimisation leaves early only when the group's are all proved): its own,
  // then copies of its last (of the spare when it has none), whose results are dropped.
  const auto n = int64_t(ds.size());
  const int64_t per = group_max(n);
  if (per == 0) return {};
  std::vector<Domain> part(std::make_move_iterator(ds.begin()), std::make_move_iterator(ds.end()));
  const Domain pad = n > 0 ? part.back() : *spare_;
  part.resize(size_t(per), pad);
  const int64_t counted = bounded_;
  Bounded b = bound_here(part, iterations, optimise, n);
  bounded_ = counted + n;
  for (int64_t i = 0; i < n; ++i) ds[size_t(i)] = std::move(part[size_t(i)]);
  b.values = b.values.narrow(0, 0, n);
  b.lower = b.lower.narrow(0, 0, n);
  if (b.input_A.defined()) b.input_A = b.input_A.narrow(1, 0, n);
  return b;
}

void ReluBab::store(std::vector<Domain>& ds, const at::Tensor& values,
                    const std::vector<at::Tensor>& alpha, const std::vector<at::Tensor>& beta,
                    const at::Tensor& scores, bool optimise) const {
  const at::Tensor v = values.to(at::kDouble).contiguous();
  for (size_t b = 0; b < ds.size(); ++b) {
    Domain& d = ds[b];
    const double value = v[int64_t(b)].item<double>();
    d.value = optimise ? std::max(value, d.floor) : value;
    for (size_t r = 0; r < relus_.size(); ++r) {
      d.alpha[r] = alpha[r].detach().narrow(1, int64_t(b), 1).clone();
      d.beta[r] = beta[r].detach().narrow(1, int64_t(b), 1).clone();
    }
    if (scores.defined()) d.score = scores[int64_t(b)].clone();
  }
}

ReluBab::Bounded ReluBab::bound_here(std::vector<Domain>& ds, int iterations, bool optimise,
                                     std::optional<int64_t> real) {
  const auto B = int64_t(ds.size());
  const size_t R = relus_.size();
  std::vector<Interval> pre_bounds(R);
  std::vector<at::Tensor> alpha(R), beta(R), split(R);
  // Domains keep every neuron; the passes see this rank's (local_part; all of them without TP).
  const auto part = [&](std::vector<at::Tensor> Domain::*field, size_t r, int64_t dim) {
    return local_part(cat_dim(ds, field, r, dim), r).contiguous();
  };
  std::vector<at::Tensor> whole_split(R);  // every neuron's: every rank refreshes the same layers
  for (size_t r = 0; r < R; ++r) {
    whole_split[r] = cat_dim(ds, &Domain::split, r, 0);
    pre_bounds[r] = {part(&Domain::lower, r, 0), part(&Domain::upper, r, 0)};
    alpha[r] = part(&Domain::alpha, r, 1).detach().requires_grad_(optimise);
    beta[r] = part(&Domain::beta, r, 1).detach().requires_grad_(optimise);
    split[r] = local_part(whole_split[r], r).contiguous();
  }
  std::vector<int64_t> in_shape(g_.input_shape().begin(), g_.input_shape().end());
  in_shape[0] = B;
  const InputBox box{box_.lower.expand(in_shape), box_.upper.expand(in_shape)};
  SplitHook hook(g_.output(), relu_index_);
  hook.relu_A.resize(R);
  std::vector<at::Tensor> params;
  for (size_t r = 0; r < R; ++r) params.push_back(alpha[r]);
  const size_t n_alpha = params.size();
  for (size_t r = 0; r < R; ++r) params.push_back(beta[r]);
  Adam adam_alpha(o_.lr_alpha);
  Adam adam_beta(o_.lr_beta);
  // With refreshed intermediate bounds (not for FSB's trial children): the ReLU inputs after
  // the batch's earliest split layer get CROWN bounds over these domains' bounds before them,
  // intersected with their own. Inputs of the other relaxed nodes (MaxPool, Sigmoid): CROWN
  // bounds over these domains' ReLU bounds. Once per batch: neither depends on α or β.
  const size_t refresh_after =
      optimise && o_.intermediate == BabIntermediate::kRefresh ? earliest_split(whole_split) : R;
  std::vector<std::pair<int, Interval>> other_bounds;
  if (!other_pre_.empty() || refresh_after + 1 < R) {
    c10::NoGradGuard no_grad;
    CrownEngine engine(g_, box, bo_);
    for (size_t r = 0; r < R; ++r) {
      if (r <= refresh_after) {
        engine.set_bounds(pre_[r], pre_bounds[r]);
      } else {
        engine.set_reference_bounds(pre_[r], pre_bounds[r]);
      }
    }
    engine.intersect_with_references();
    engine.compute_intermediate_bounds();
    for (size_t r = refresh_after + 1; r < R; ++r) pre_bounds[r] = engine.bounds(pre_[r]);
    for (const int i : other_pre_) other_bounds.emplace_back(i, engine.bounds(i));
  }
  // Without --deterministic, domains proved during the optimisation leave it once they are a
  // fifth of those still in it (α,β-CROWN's pruning in iteration): a large batch then costs
  // what its open domains cost. `keep` [B'] are the batch positions still optimised; the
  // working tensors (pre, cut_split, other, cut_box, α, β) hold those rows, and full_alpha /
  // full_beta every domain's latest α and β. The recorded last pass bounds every domain again.
  const bool prune = optimise && !o_.deterministic;
  at::Tensor keep = at::arange(B, at::TensorOptions().dtype(at::kLong).device(box.lower.device()));
  std::vector<Interval> pre = pre_bounds;
  std::vector<at::Tensor> cut_split = split;
  std::vector<std::pair<int, Interval>> other = other_bounds;
  InputBox cut_box = box;
  std::vector<at::Tensor> full_alpha(R), full_beta(R);
  for (size_t r = 0; r < R && prune; ++r) {  // copies: written while alpha/beta still are read
    full_alpha[r] = alpha[r].detach().clone();
    full_beta[r] = beta[r].detach().clone();
  }
  // Writes the optimised rows' α and β back into every domain's; `widen`: the working α and β
  // become the full ones again (every domain bounded from here on).
  const auto write_back = [&](bool widen) {
    for (size_t r = 0; r < R; ++r) {
      full_alpha[r].index_copy_(1, keep, alpha[r].detach());
      full_beta[r].index_copy_(1, keep, beta[r].detach());
      if (widen) {
        alpha[r] = full_alpha[r];
        beta[r] = full_beta[r];
      }
    }
  };
  const auto narrow_to = [&](const at::Tensor& rows) {  // rows: positions within `keep`
    c10::NoGradGuard no_grad;
    keep = keep.index_select(0, rows);
    const auto cut = [&](const Interval& i) {
      return Interval{i.lower.index_select(0, rows), i.upper.index_select(0, rows)};
    };
    for (size_t r = 0; r < R; ++r) {
      pre[r] = cut(pre[r]);
      cut_split[r] = cut_split[r].index_select(0, rows);
      alpha[r] = alpha[r].detach().index_select(1, rows).requires_grad_(true);
      beta[r] = beta[r].detach().index_select(1, rows).requires_grad_(true);
      params[r] = alpha[r];
      params[n_alpha + r] = beta[r];
    }
    for (auto& [i, b] : other) b = cut(b);
    cut_box = {cut_box.lower.index_select(0, rows), cut_box.upper.index_select(0, rows)};
    adam_alpha.select(1, rows);
    adam_beta.select(1, rows);
  };
  at::Tensor best;  // [B, K]
  Bounded out;
  const int passes = std::max(1, optimise ? iterations : 1);
  for (int it = 0; it < passes; ++it) {
    const bool last = it + 1 == passes;
    if (last && keep.size(0) < B) {
      // The recorded pass bounds every domain, each with its latest α and β.
      pre = pre_bounds;
      cut_split = split;
      other = other_bounds;
      cut_box = box;
      write_back(true);
      keep = at::arange(B, keep.options());
    }
    c10::AutoGradMode grad(optimise && !last);
    CrownEngine engine(g_, cut_box, bo_);
    for (size_t r = 0; r < R; ++r) engine.set_bounds(pre_[r], pre[r]);
    for (const auto& [i, b] : other) engine.set_bounds(i, b);
    hook.alpha = alpha;
    hook.beta_signed.clear();
    for (size_t r = 0; r < R; ++r) hook.beta_signed.push_back(beta[r] * cut_split[r]);
    hook.record = last;
    engine.set_hook(&hook);
    const at::Tensor lb = engine.output_bounds(obj_.C, true, false).lower;  // [B', K]
    if (!best.defined()) {
      best = lb.detach().clone();
    } else {
      best.index_copy_(0, keep, at::maximum(best.index_select(0, keep), lb.detach()));
    }
    if (last) {
      out.recorded = true;
      break;
    }
    if (deadline_.expired()) break;
    at::Tensor open = domain_values(obj_, best.index_select(0, keep)) <= 0;  // [B']
    if (real) open = open & (keep < *real);  // padding leaves with the proved
    const int64_t n_open = open.sum().item<int64_t>();
    int64_t open_in_group = n_open;
    if (share_) {  // the shares leave the optimisation together (their passes stay in step)
      at::Tensor count = open.sum().reshape({1});
      share_->all_reduce(count, collective::ReduceOp::kSum);
      open_in_group = count.item<int64_t>();
    }
    if (!o_.deterministic && open_in_group == 0) break;
    (-lb.sum()).backward();
    const std::vector<at::Tensor> a(params.begin(), params.begin() + long(n_alpha));
    const std::vector<at::Tensor> b(params.begin() + long(n_alpha), params.end());
    adam_alpha.step(a);
    adam_beta.step(b);
    c10::NoGradGuard no_grad;
    for (size_t r = 0; r < R; ++r) {
      alpha[r].clamp_(0.0, 1.0);
      beta[r].clamp_min_(0.0);
    }
    // n_open > 0: a spec-parallel share whose domains are all proved keeps them while the
    // group's others are open (a pass needs a domain; its steps stay in step with the group's).
    if (prune && n_open > 0 && double(keep.size(0) - n_open) >= 0.2 * double(keep.size(0))) {
      write_back(false);
      narrow_to(open.nonzero().squeeze(1).to(keep.device()));
    }
  }
  if (keep.size(0) < B) write_back(true);  // left the loop early: each domain's latest α, β
  bounded_ += B;
  out.lower = best;
  out.values = domain_values(obj_, best);  // [B]
  // Scores (branching.hpp): BaBSR's score and intercept score of each free unstable neuron, over
  // the spec rows that still matter (joined disjuncts drop those proved on the domain).
  const at::Tensor row_weight = open_rows(obj_, best).t().reshape({K_, B, 1});  // [K, B, 1]
  std::vector<std::pair<at::Tensor, size_t>> scores;  // per ReLU: score, intercept, [B, *shape]
  for (size_t r = 0; r < R && out.recorded; ++r) {
    const at::Tensor l = pre_bounds[r].lower.reshape({B, -1});
    const at::Tensor u = pre_bounds[r].upper.reshape({B, -1});
    const at::Tensor A = hook.relu_A[r].defined()
                             ? hook.relu_A[r].slice(0, 0, K_).reshape({K_, B, -1})
                             : at::zeros({K_, B, l.size(1)}, best.options());
    const BabsrScores sc =
        babsr_scores(A, row_weight, l, u, bias_[r], o_.branching_reduce == BranchingReduce::kMax);
    const at::Tensor free = (l < 0) & (u > 0) & (split[r].reshape({B, -1}) == 0);
    const at::Tensor none = at::full_like(l, kUnsplittable);
    // Tie-break toward wide intervals so that neurons without a score are still ordered.
    const auto shape = pre_bounds[r].lower.sizes();
    scores.emplace_back(at::where(free, sc.score + 1e-9 * (u - l), none).reshape(shape), r);
    scores.emplace_back(at::where(free, -sc.intercept, none).reshape(shape), r);
  }
  // Every neuron's, as domains keep them: one AllGather per kind under TP.
  at::Tensor all_scores;  // [B, 2, N_all]
  if (out.recorded) {
    const std::vector<at::Tensor> w = whole(scores);
    std::vector<at::Tensor> per_relu;
    for (size_t r = 0; r < R; ++r) {
      per_relu.push_back(at::stack({w[2 * r].reshape({B, -1}), w[2 * r + 1].reshape({B, -1})}, 1));
    }
    all_scores = at::cat(per_relu, 2).to(at::kFloat);
  }
  std::vector<std::pair<at::Tensor, size_t>> params_of;
  for (size_t r = 0; r < R; ++r) {
    params_of.emplace_back(alpha[r], r);
    params_of.emplace_back(beta[r], r);
  }
  const std::vector<at::Tensor> params_whole = whole(params_of);
  for (size_t r = 0; r < R; ++r) {
    alpha[r] = params_whole[2 * r];
    beta[r] = params_whole[2 * r + 1];
  }
  store(ds, out.values, alpha, beta, all_scores, optimise);
  std::vector<std::pair<at::Tensor, size_t>> refreshed;
  for (size_t r = refresh_after + 1; r < R; ++r) {
    refreshed.emplace_back(pre_bounds[r].lower, r);
    refreshed.emplace_back(pre_bounds[r].upper, r);
  }
  const std::vector<at::Tensor> bounds_whole = whole(refreshed);
  for (size_t r = refresh_after + 1, k = 0; r < R; ++r, k += 2) {
    for (int64_t b = 0; b < B; ++b) {
      ds[size_t(b)].lower[r] = bounds_whole[k].narrow(0, b, 1).clone();
      ds[size_t(b)].upper[r] = bounds_whole[k + 1].narrow(0, b, 1).clone();
    }
  }
  out.input_A = hook.input_A;
  return out;
}

Domain ReluBab::make_root(const std::vector<Interval>& bounds,
                          const std::map<int, at::Tensor>& output_alpha) {
  Domain d;
  for (size_t r = 0; r < relus_.size(); ++r) {
    const Interval b{whole(bounds[r].lower, r), whole(bounds[r].upper, r)};
    d.lower.push_back(b.lower);
    d.upper.push_back(b.upper);
    std::vector<int64_t> shape{K_};
    shape.insert(shape.end(), b.lower.sizes().begin(), b.lower.sizes().end());
    const auto it = output_alpha.find(relus_[r]);
    d.alpha.push_back(
        it != output_alpha.end()
            ? whole(it->second, r)
            : g_.node(relus_[r]).op->initial_relaxation_params(b).expand(shape).clone());
    d.beta.push_back(at::zeros(shape, b.lower.options()));
    d.split.push_back(at::zeros_like(b.lower));
  }
  return d;
}

Domain ReluBab::root(const RootStart* start) {
  if (start != nullptr) {
    std::vector<Interval> bounds;
    for (const int pre : pre_) {
      if (size_t(pre) >= start->intermediate.size() || !start->intermediate[size_t(pre)]) {
        throw Error("internal: the root start has no bounds for a ReLU input");
      }
      bounds.push_back(*start->intermediate[size_t(pre)]);
    }
    return make_root(bounds, start->output_alpha);
  }
  AlphaOptions ao;
  ao.iterations = o_.root_iterations;
  ao.lr = o_.root_lr;
  ao.deadline = deadline_;
  const AlphaResult a = alpha_crown(g_, box_, obj_.C, ao, bo_, true, false);
  std::vector<Interval> bounds;
  for (const int pre : pre_) {
    const auto& b = a.intermediate.at(size_t(pre));
    if (!b) throw Error("internal: no root bounds for a ReLU input");
    bounds.push_back(*b);
  }
  return make_root(bounds, a.output_alpha);
}

Domain ReluBab::crown_root_with(const std::vector<NeuronSplit>& splits) {
  CrownEngine engine(g_, box_, bo_);
  engine.compute_intermediate_bounds();
  std::vector<Interval> bounds;
  for (const int pre : pre_) bounds.push_back(engine.bounds(pre));
  Domain d = make_root(bounds, {});
  int64_t id = 0;
  for (const NeuronSplit& s : splits) {
    const auto it = relu_index_.find(s.relu_node);
    if (it == relu_index_.end()) throw InvalidArgument("split on a node that is not a ReLU");
    if (s.neuron < 0 || s.neuron >= d.lower[it->second].numel()) {
      throw InvalidArgument("split neuron index out of range");
    }
    d = child(d, it->second, s.neuron, s.active, ++id);
  }
  return d;
}

Domain ReluBab::child(const Domain& parent, size_t r, int64_t j, bool active, int64_t id) {
  Domain c = parent;  // shares every tensor with the parent
  c.id = id;
  c.floor = parent.value;
  c.lower[r] = parent.lower[r].clone();
  c.upper[r] = parent.upper[r].clone();
  c.split[r] = parent.split[r].clone();
  if (active) {
    c.lower[r].view({-1})[j] = 0.0;  // z >= 0
  } else {
    c.upper[r].view({-1})[j] = 0.0;  // z <= 0
  }
  c.split[r].view({-1})[j] = active ? -1.0 : 1.0;
  c.score = at::Tensor();
  return c;
}

// (ReLU, flat neuron) per parent. Under spec-parallel, collective over the group (FSB's trial
// passes), also on a rank without parents.
std::vector<std::pair<size_t, int64_t>> ReluBab::choose(const std::vector<Domain>& parents,
                                                        int64_t batch) {
  const Domain& shapes = parents.empty() ? *spare_ : parents.front();
  std::vector<int64_t> offsets{0};
  for (size_t r = 0; r < relus_.size(); ++r) {
    offsets.push_back(offsets.back() + shapes.lower[r].numel());
  }
  const auto locate = [&](int64_t flat) {
    size_t r = 0;
    while (flat >= offsets[r + 1]) ++r;
    return std::pair<size_t, int64_t>{r, flat - offsets[r]};
  };
  std::vector<std::pair<size_t, int64_t>> picks;
  const bool fsb = o_.branching == Branching::kFsb && o_.fsb_candidates > 1;
  std::vector<std::vector<int64_t>> cands(parents.size());
  for (size_t p = 0; p < parents.size(); ++p) {
    const at::Tensor& s = parents[p].score;  // [2, N_all]
    cands[p] = fsb ? fsb_candidates(s, o_.fsb_candidates)
                   : std::vector<int64_t>{std::max<int64_t>(babsr_choice(s), 0)};
    picks.push_back(locate(cands[p].empty() ? 0 : cands[p].front()));
  }
  if (!fsb) return picks;
  // FSB: bound both children of every candidate once (no optimisation) and keep, per parent, the
  // candidate whose worse child (with BranchingReduce::kMax, better child) is best.
  std::vector<Domain> trial;
  std::vector<std::pair<size_t, int64_t>> owner;  // (parent, flat)
  for (size_t p = 0; p < parents.size(); ++p) {
    if (cands[p].size() <= 1) continue;
    for (int64_t flat : cands[p]) {
      const auto [r, j] = locate(flat);
      trial.push_back(child(parents[p], r, j, false, -1));  // bounded, never queued
      trial.push_back(child(parents[p], r, j, true, -1));
      owner.emplace_back(p, flat);
    }
  }
  // In pieces no larger than the children of this holder's share of a round, so that FSB's trial
  // (2·k children per parent) never holds more at once than the round's own bounding does; under
  // spec-parallel as many pieces on every rank of the group (bound() pads the short ones).
  const int64_t holders = units_.groups;
  const auto piece = size_t(2 * ((batch + holders - 1) / holders));
  auto n_pieces = int64_t((trial.size() + piece - 1) / piece);
  if (share_) n_pieces = group_max(n_pieces);
  std::vector<at::Tensor> pieces;
  for (int64_t k = 0; k < n_pieces; ++k) {
    const size_t s = std::min(trial.size(), size_t(k) * piece);
    std::vector<Domain> part(
        std::make_move_iterator(trial.begin() + long(s)),
        std::make_move_iterator(trial.begin() + long(std::min(trial.size(), s + piece))));
    pieces.push_back(bound(part, 0, false).values);
  }
  if (trial.empty()) return picks;
  const auto v = at::cat(pieces).to(at::kDouble).contiguous();
  std::vector<double> best(parents.size(), -std::numeric_limits<double>::infinity());
  for (size_t t = 0; t < owner.size(); ++t) {
    const double inactive = v[int64_t(2 * t)].item<double>();
    const double active = v[int64_t(2 * t + 1)].item<double>();
    const double reduced = o_.branching_reduce == BranchingReduce::kMax
                               ? std::max(inactive, active)
                               : std::min(inactive, active);
    const size_t p = owner[t].first;
    if (reduced > best[p]) {
      best[p] = reduced;
      picks[p] = locate(owner[t].second);
    }
  }
  return picks;
}

std::optional<Counterexample> ReluBab::attack_from(const std::vector<Domain>& ds, const Bounded& b,
                                                   std::optional<int64_t> pgd_round, bool shared) {
  if (!b.input_A.defined()) return std::nullopt;  // the same on every rank of a group
  // The box corner minimising each domain's lower linear bound of each row, keyed by (id, row).
  const auto B = int64_t(ds.size());
  const at::Tensor A = b.input_A.slice(0, 0, K_);  // [K, B, *in]
  const at::Tensor centre = (box_.upper + box_.lower) / 2;
  const at::Tensor radius = (box_.upper - box_.lower) / 2;
  std::vector<at::Tensor> points;
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < B; ++i) {
    if (ds[size_t(i)].value > 0) continue;
    for (int64_t k = 0; k < K_; ++k) {
      points.push_back(centre - A[k][i].unsqueeze(0).sign() * radius);
      keys.push_back(ds[size_t(i)].id * K_ + k);
    }
  }
  at::Tensor x = points.empty() ? at::Tensor() : at::cat(points, 0);  // [n, *in]
  if (shared && share_) {
    // Every rank's corners, padded to the group's largest count (key -1), in key order: the
    // children's ids grow with their parents' plan positions, so this is one process's order.
    const int64_t most = group_max(int64_t(keys.size()));
    if (most == 0) return std::nullopt;
    std::vector<int64_t> in_shape(box_.lower.sizes().begin(), box_.lower.sizes().end());
    in_shape[0] = most;
    at::Tensor mine = at::zeros(in_shape, box_.lower.options());
    at::Tensor mine_keys = at::full({most}, int64_t(-1), at::TensorOptions().dtype(at::kLong));
    if (x.defined()) {
      mine.narrow(0, 0, x.size(0)).copy_(x);
      mine_keys.narrow(0, 0, int64_t(keys.size())).copy_(at::tensor(keys, at::kLong));
    }
    mine_keys = mine_keys.to(box_.lower.device());
    in_shape[0] = most * share_->size();
    at::Tensor all = at::empty(in_shape, mine.options());
    at::Tensor all_keys = at::empty({in_shape[0]}, mine_keys.options());
    share_->all_gather(mine, all);
    share_->all_gather(mine_keys, all_keys);
    const at::Tensor real = all_keys.ge(0).nonzero().squeeze(1);
    const at::Tensor order = real.index_select(0, all_keys.index_select(0, real).argsort());
    x = all.index_select(0, order);
  }
  if (!x.defined()) return std::nullopt;
  if (auto cex = check_candidates(g_, case_, x)) return cex;
  if (!pgd_round) return std::nullopt;
  // The group's deadline: groups run their rounds' passes apart.
  const AttackOptions ao = round_attack(o_.attack, *pgd_round, deadline_);
  return pgd_attack(g_, case_, disjuncts_, ao, x.slice(0, 0, std::min<int64_t>(x.size(0), 64)));
}

DomainStoreBytes ReluBab::store_bytes(const std::vector<Domain>& queue) const {
  DomainStoreBytes s;
  std::set<const void*> seen;  // children share tensors with their parents: count each once
  const auto add = [&](int64_t& acc, const at::Tensor& t) {
    if (t.defined() && seen.insert(t.storage().data()).second) acc += int64_t(t.nbytes());
  };
  for (const Domain& d : queue) {
    for (size_t r = 0; r < relus_.size(); ++r) {
      add(s.alpha, d.alpha[r]);
      add(s.beta, d.beta[r]);
      add(s.bounds, d.lower[r]);
      add(s.bounds, d.upper[r]);
      add(s.other, d.split[r]);
    }
    add(s.other, d.score);
  }
  return s;
}

BabResult ReluBab::run(ReluBabStats* stats, const RootStart* start) {
  progress_.start("bab (relu splits)");
  try {
    return search(stats, start);
  } catch (const DeadlineReached&) {
    // Only from a step that every rank takes together (search catches the rest).
    res_.status = BabStatus::kTimeout;
    res_.domains_bounded = bounded_;
    return res_;
  }
}

void ReluBab::cap_batch(RoundReport& mine, int64_t last_batch, int64_t queued) const {
  mine.batch_cap = o_.batch;
  mine.memory_full = false;
  const int64_t limit = o_.memory_limit_bytes;
  if (limit <= 0) return;
  const int64_t live = memory::usage(g_.device()).live_bytes;
  mine.live_bytes = live;
  mine.limit_bytes = limit;
  const auto groups = double(units_.groups);  // holders of domains: groups, or ranks
  const double room = double(limit) - double(live);
  if (o_.deterministic) {
    // The batch stays fixed: its predicted peak (this group's share of it, or what the group
    // holds when less) must fit.
    const double share = std::min(std::ceil(double(o_.batch) / groups), double(queued));
    mine.memory_full = room <= 0 || per_parent_bytes_ * share > room;
    return;
  }
  if (room <= 0) {
    mine.memory_full = true;
    return;
  }
  if (per_parent_bytes_ <= 0) return;                       // nothing measured yet
  const double fit = std::floor(room / per_parent_bytes_);  // parents per group
  if (fit < 1) {
    mine.memory_full = true;
    return;
  }
  // Grows back at most by doubling: the cost per domain was measured at the last batch.
  const double cap = std::min({double(o_.batch), 2.0 * double(last_batch), fit * groups});
  mine.batch_cap = std::max<int64_t>(1, int64_t(cap));
}

BabResult ReluBab::search(ReluBabStats* stats, const RootStart* start) {
  BabResult& res = res_;
  const BabWorld& w = units_;
  const int me = w.group_index();
  const auto done = [&](BabStatus status) {
    res.status = status;
    return res;
  };
  if (K_ == 0) {
    res.reason = "a disjunct without output constraints holds everywhere";
    return done(BabStatus::kUnknown);
  }
  // Every group bounds the root (the same computation everywhere); group 0 queues it. From
  // here on, a rank's own outcomes (a counterexample, a deadline inside a pass, a dropped
  // domain) go into its report and are decided on together at the next round's exchange, so
  // that every rank leaves the loop in the same round with the same result.
  RoundReport mine;
  std::vector<Domain> queue;  // a heap by worse_first
  try {
    std::vector<Domain> first{root(start)};
    if (share_) spare_ = first.front();
    const Bounded b = bound(first, o_.iterations, true);
    if (me != 0) bounded_ = 0;  // the root counts once, as group 0's (rank 0's)
    mine.counterexample = attack_from(first, b, std::nullopt, false);
    if (!mine.counterexample && first.front().value <= 0) {
      if (relus_.empty()) {
        mine.no_splittable = true;
      } else if (me == 0) {
        queue.push_back(std::move(first.front()));
      }
    }
  } catch (const DeadlineReached&) {
    mine.timed_out = true;
  }
  int64_t first_id = 1;           // of the next round's children
  int64_t last_batch = o_.batch;  // the last round's batch (the smallest cap over the ranks)
  for (;;) {
    // This group's worst domains, at most a batch (under this rank's memory cap); all its ranks
    // pop the same ones.
    std::vector<Domain> candidates;
    if (!mine.timed_out) mine.timed_out = deadline_.expired();
    cap_batch(mine, last_batch, int64_t(queue.size()));
    const int64_t take = std::min(o_.batch, mine.batch_cap);
    while (!mine.timed_out && !queue.empty() && int64_t(candidates.size()) < take) {
      std::pop_heap(queue.begin(), queue.end(), worse_first);
      Domain d = std::move(queue.back());
      queue.pop_back();
      if (!d.score.defined() || (d.score < 0).all().item<bool>()) {
        mine.exhausted = true;  // every unstable neuron is split: nothing left to branch on
        continue;
      }
      candidates.push_back(std::move(d));
    }
    detail::report_candidates(mine, candidates, queue.size(), bounded_);
    const std::vector<RoundReport> groups = detail::exchange_reports(w, mine);
    const detail::RoundTally tally = detail::tally_round(groups, res);
    if (share_) per_group_of_ranks(res);
    if (tally.falsified) return done(BabStatus::kFalsified);
    if (tally.timed_out) return done(BabStatus::kTimeout);
    // The smallest cap of every rank (exchange_reports gave every group the world's): the same
    // batch everywhere.
    int64_t batch = o_.batch;
    for (const RoundReport& g : groups) batch = std::min(batch, g.batch_cap);
    const std::vector<Planned> plan = detail::plan_round(groups, batch);
    if (plan.empty()) {
      if (tally.no_splittable) {
        res.reason =
            "no splittable neurons (the network's nonlinearities cannot be split) and "
            "alpha-CROWN does not prove the property";
        return done(BabStatus::kUnknown);
      }
      if (tally.exhausted) {
        res.reason = "a domain with every unstable neuron split was not proved";
        return done(BabStatus::kUnknown);
      }
      return done(BabStatus::kProved);
    }
    res.worst_value = plan.front().value;
    progress_.report(res.rounds, res.domains_bounded, tally.queued, res.worst_value);
    if (const RoundReport& full = groups.front(); full.memory_full) {
      res.memory_limited = true;
      std::array<char, 96> text{};
      std::snprintf(text.data(), text.size(), "memory limit reached: %.3g MB live, limit %.3g MB",
                    double(full.live_bytes) / 1e6, double(full.limit_bytes) / 1e6);
      res.reason = text.data();
      return done(BabStatus::kUnknown);
    }
    if (o_.max_rounds > 0 && res.rounds >= o_.max_rounds) {
      res.reason = "round limit reached";
      return done(BabStatus::kUnknown);
    }
    ++res.rounds;
    res.min_batch = res.min_batch == 0 ? batch : std::min(res.min_batch, batch);
    res.memory_limited = res.memory_limited || batch < o_.batch;
    last_batch = batch;
    int64_t moved = 0;  // every transfer between the plan's holders
    std::vector<std::pair<int64_t, Domain>> planned = detail::take_planned(
        w, plan, candidates, queue,
        [&](std::string_view bytes) { return detail::decode_domain(bytes, g_.device()); }, moved);
    if (share_) {  // the holders are ranks: the transfers inside a group are counted apart
      const int size = o_.world.group_size();
      const auto inside = std::count_if(plan.begin(), plan.end(), [&](const Planned& p) {
        return p.holder != p.bounder && p.holder / size == p.bounder / size;
      });
      res.domains_moved_in_groups += inside;
      moved -= inside;
    }
    res.domains_moved += moved;
    // The round's cost in tensor bytes, from its start (the parents taken) to its peak (with the
    // children queued), on the accountant's step peak (its run peak stays the whole run's).
    const bool measure = o_.memory_limit_bytes > 0 && !planned.empty();
    if (measure) memory::reset_step_peak(g_.device());
    const int64_t live_before = memory::usage(g_.device()).live_bytes;
    try {
      std::vector<Domain> parents;
      parents.reserve(planned.size());
      for (auto& [p, d] : planned) parents.push_back(std::move(d));
      if (!parents.empty() || share_) {  // spec-parallel: the group's passes stay in step
        const auto picks = choose(parents, batch);
        std::vector<Domain> children;
        for (size_t i = 0; i < parents.size(); ++i) {
          const int64_t id = first_id + 2 * planned[i].first;
          const auto [r, j] = picks[i];
          children.push_back(child(parents[i], r, j, false, id));
          children.push_back(child(parents[i], r, j, true, id + 1));
        }
        parents.clear();
        const Bounded b = bound(children, o_.iterations, true);
        const bool pgd = o_.attack_every > 0 && res.rounds % o_.attack_every == 0;
        mine.counterexample =
            attack_from(children, b, pgd ? std::optional<int64_t>(res.rounds) : std::nullopt, true);
        for (Domain& c : children) {
          if (c.value > 0) continue;  // proved
          queue.push_back(std::move(c));
          std::push_heap(queue.begin(), queue.end(), worse_first);
        }
      }
    } catch (const DeadlineReached&) {
      mine.timed_out = true;
    }
    if (measure) {
      per_parent_seen_.push_back(
          double(std::max<int64_t>(0, memory::step_peak_bytes(g_.device()) - live_before)) /
          double(planned.size()));
      if (int64_t(per_parent_seen_.size()) > std::max(1, o_.attack_every)) {
        per_parent_seen_.pop_front();
      }
      per_parent_bytes_ = *std::max_element(per_parent_seen_.begin(), per_parent_seen_.end());
    }
    first_id += 2 * int64_t(plan.size());
    res.max_queue = std::max<int64_t>(res.max_queue, int64_t(queue.size()));
    if (stats != nullptr) {
      const DomainStoreBytes now = store_bytes(queue);
      if (now.total() > stats->peak_store.total()) stats->peak_store = now;
    }
  }
}

// The limit a branch and bound keeps to (0: none): CUDA tensors are counted by LibTorch's
// caching allocator; CPU tensors by the memory accountant, only once installed.
int64_t memory_limit(int64_t requested, const at::Device& device) {
  if (requested < 0) throw InvalidArgument("memory limit must be >= 0 bytes");
  if (device.is_cuda()) return requested > 0 ? requested : default_memory_limit_bytes(true);
  if (!device.is_cpu()) {
    if (requested > 0) {
      throw InvalidArgument("a memory limit is enforced on CPU and CUDA devices only, not " +
                            device.str());
    }
    return 0;
  }
  if (!memory::counting_installed()) {
    if (requested > 0) {
      throw InvalidArgument(
          "a memory limit needs the memory accountant: call "
          "memory::install_counting_allocator() first");
    }
    return 0;
  }
  return requested > 0 ? requested : default_memory_limit_bytes();
}

}  // namespace

at::Tensor split_domain_lower_bound(const BoundGraph& g, const InputBox& box, const at::Tensor& C,
                                    const std::vector<NeuronSplit>& splits, int iterations,
                                    const BabOptions& options, const BoundOptions& bound_options) {
  io::VnnlibCase c;
  c.input_lower = to_doubles(box.lower);
  c.input_upper = to_doubles(box.upper);
  const Objective obj{C.to(g.dtype()), at::zeros({C.size(0)}, at::kDouble), {}};
  const std::vector<Objective> none;
  const Deadline no_deadline(0);
  ReluBab bab(g, c, obj, none, options, no_deadline, bound_options);
  std::vector<Domain> ds{bab.crown_root_with(splits)};
  return bab.bound(ds, iterations, iterations > 0).lower;
}

BabResult relu_bab(const BoundGraph& g, const io::VnnlibCase& c, const Objective& objective,
                   const std::vector<Objective>& disjuncts, const BabOptions& options,
                   const Deadline& deadline, const BoundOptions& bound_options, ReluBabStats* stats,
                   const RootStart* start) {
  if (options.batch < 1) throw InvalidArgument("branch and bound batch must be >= 1");
  BabOptions o = options;
  o.memory_limit_bytes = memory_limit(options.memory_limit_bytes, g.device());
  ReluBab bab(g, c, objective, disjuncts, o, deadline, bound_options);
  return bab.run(stats, start);
}

}  // namespace distcrown::bab
