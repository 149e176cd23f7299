#include "relu_bounding.hpp"

#include <algorithm>
#include <map>
#include <span>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "bab/branching.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/relaxation_hook.hpp"
#include "distcrown/util/error.hpp"
#include "methods/relaxation_optimiser.hpp"
#include "relu_domain.hpp"

namespace distcrown::bab::detail {
namespace {

// A general node's α as its op reads it ([K, *P]) from the batch's ([K, B, *shape] or
// [K, B, k, *shape], relu_domain.hpp's general_alpha); `neuron_dims` = 1 + the shape's dims.
at::Tensor op_alpha(const at::Tensor& a, int64_t neuron_dims) {
  return a.dim() > neuron_dims + 1 ? a.movedim(1, 2) : a;
}

// Projects the general nodes' α of a batch in place onto their op's sound set over the batch's
// input bounds (their split sides): before every pass, as α-CROWN does before every use.
void project_general_alpha(std::vector<at::Tensor>& alpha, const std::vector<Interval>& pre,
                           const ReluLayout& layout, const BoundGraph& g) {
  c10::NoGradGuard no_grad;
  for (size_t r = 0; r < alpha.size(); ++r) {
    if (!layout.general(r) || !layout.has_alpha(r)) continue;
    // [1, K, *P]: project_relaxation_params takes both sides' α, [2, rows, *P].
    at::Tensor both = op_alpha(alpha[r], pre[r].lower.dim()).unsqueeze(0);
    g.node(layout.relu(r)).op->project_relaxation_params(both, pre[r]);
  }
}

// Relaxation parameters of one batch: α and β·s per ReLU, and what the last pass saw (the A at
// every split node's output, general ones included: their branching scores read it).
class SplitHook final : public RelaxationHook {
 public:
  SplitHook(int output, const ReluLayout& layout)
      : relu_A(layout.size()),
        output_(output),
        relu_index_(layout.relu_index()),
        split_index_(layout.index()),
        layout_(layout) {}

  // General split nodes: their β term is added by the engine (RelaxParams::point_splits).
  [[nodiscard]] bool splits_at_points(int node) const override {
    const auto it = split_index_.find(node);
    return it != split_index_.end() && layout_.general(it->second.front());
  }

  RelaxParams params(int start, int node, const at::Tensor& rows,
                     std::span<const Interval* const> /*in*/) override {
    if (start != output_) throw Error("internal: BaB pass from an intermediate node");
    // General split nodes keep CROWN's relaxation, with their split multipliers and points;
    // nodes that are not split keep CROWN's relaxation alone.
    if (splits_at_points(node)) {
      RelaxParams p;
      for (const size_t r : split_index_.at(node)) {
        p.point_splits.push_back(
            {layout_.input(r), beta_signed[r].index_select(0, rows), point[r]});
        if (layout_.has_alpha(r)) {
          p.alpha_l = op_alpha(alpha[r], point[r].dim()).index_select(0, rows);
        }
      }
      return p;
    }
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
    } else if (const auto it = split_index_.find(node); it != split_index_.end()) {
      for (const size_t r : it->second) relu_A[r] = a.lA.detach();
    }
  }

  std::vector<at::Tensor> alpha;        // [K, B, *shape]
  std::vector<at::Tensor> beta_signed;  // [K, B, *shape]
  // Per general split node, the split point of each marked neuron: the bound on its split
  // side (upper below, lower above; refreshed bounds are sound on the domain too), [B, *shape].
  std::vector<at::Tensor> point;
  bool record = false;
  std::vector<at::Tensor> relu_A;  // A at each split node's output, recorded pass [K', B, *shape]
  at::Tensor input_A;              // [K', B, *input_shape]

 private:
  int output_;
  const std::map<int, size_t>& relu_index_;
  const std::map<int, std::vector<size_t>>& split_index_;
  const ReluLayout& layout_;
};

// A batch's tensors as the passes see them (this rank's neurons under TP), per ReLU r:
// bounds [B, *shape], α and β [K, B, *shape] (leaves requiring grad when optimised), split marks
// [B, *shape]; and every neuron's split marks, so that every rank refreshes the same layers.
struct Batch {
  std::vector<Interval> pre;
  std::vector<at::Tensor> alpha, beta, split, whole_split;
  InputBox box;  // [B, *input_shape]
};

Batch gather(const std::vector<Domain>& ds, const ReluLayout& layout, const InputBox& root,
             const BoundGraph& g, bool optimise) {
  const size_t R = layout.size();
  Batch b;
  b.pre.resize(R);
  b.alpha.resize(R);
  b.beta.resize(R);
  b.split.resize(R);
  b.whole_split.resize(R);
  const auto part = [&](std::vector<at::Tensor> Domain::*field, size_t r, int64_t dim) {
    return layout.local_part(cat_field(ds, field, r, dim), r).contiguous();
  };
  for (size_t r = 0; r < R; ++r) {
    b.whole_split[r] = cat_field(ds, &Domain::split, r, 0);
    b.pre[r] = {part(&Domain::lower, r, 0), part(&Domain::upper, r, 0)};
    b.alpha[r] = part(&Domain::alpha, r, 1).detach().requires_grad_(optimise);
    b.beta[r] = part(&Domain::beta, r, 1).detach().requires_grad_(optimise);
    b.split[r] = layout.local_part(b.whole_split[r], r).contiguous();
  }
  std::vector<int64_t> in_shape(g.input_shape().begin(), g.input_shape().end());
  in_shape[0] = int64_t(ds.size());
  b.box = {root.lower.expand(in_shape), root.upper.expand(in_shape)};
  return b;
}

// With refreshed intermediate bounds, the ReLU inputs after layer `refresh_after` get CROWN
// bounds over the batch's bounds before them, intersected with their own (written into
// b.pre); inputs of the other relaxed nodes (MaxPool, Sigmoid) CROWN bounds over the batch's
// ReLU bounds (returned). Once per batch: neither depends on α or β.
std::vector<std::pair<int, Interval>> refresh(Batch& b, const BoundGraph& g,
                                              const ReluLayout& layout, const BoundOptions& bo,
                                              size_t refresh_after) {
  const size_t R = layout.size();
  std::vector<std::pair<int, Interval>> other;
  if (layout.other_pre().empty() && refresh_after + 1 >= R) return other;
  c10::NoGradGuard no_grad;
  CrownEngine engine(g, b.box, bo);
  for (size_t r = 0; r < R; ++r) {
    if (r <= refresh_after) {
      engine.set_bounds(layout.pre(r), b.pre[r]);
    } else {
      engine.set_reference_bounds(layout.pre(r), b.pre[r]);
    }
  }
  engine.intersect_with_references();
  engine.compute_intermediate_bounds();
  for (size_t r = refresh_after + 1; r < R; ++r) b.pre[r] = engine.bounds(layout.pre(r));
  for (const int i : layout.other_pre()) other.emplace_back(i, engine.bounds(i));
  return other;
}

// The batch positions still optimised and their rows of every working tensor. Without
// --deterministic, domains proved during the optimisation leave it once they are a fifth of
// those still in it (α,β-CROWN's pruning in iteration): a large batch then costs what its open
// domains cost. `full_alpha` / `full_beta` hold every domain's latest α and β.
class Working {
 public:
  /// `slopes[r]`: α of split node r are a ReLU's lower slopes (kept in [0, 1] by the optimiser);
  /// a general node's are projected by its op before each pass (project_general_alpha).
  Working(const Batch& b, std::vector<std::pair<int, Interval>> other_bounds, bool prune,
          const BabOptions& o, std::vector<bool> slopes)
      : keep(at::arange(int64_t(b.box.lower.size(0)),
                        at::TensorOptions().dtype(at::kLong).device(b.box.lower.device()))),
        pre(b.pre),
        split(b.split),
        other(other_bounds),
        box(b.box),
        alpha(b.alpha),
        beta(b.beta),
        all_(b),
        all_other_(std::move(other_bounds)),
        slopes_(std::move(slopes)) {
    for (size_t r = 0; r < alpha.size() && prune; ++r) {  // copies: written while still read
      full_alpha_.push_back(alpha[r].detach().clone());
      full_beta_.push_back(beta[r].detach().clone());
    }
    alpha_group_ = optimiser.add_group(o.lr_alpha, RelaxationOptimiser::Projection::kUnitInterval,
                                       of_kind(alpha, true));
    general_group_ = optimiser.add_group(o.lr_alpha, RelaxationOptimiser::Projection::kNone,
                                         of_kind(alpha, false));
    beta_group_ =
        optimiser.add_group(o.lr_beta, RelaxationOptimiser::Projection::kNonNegative, beta);
  }

  /// Writes the optimised rows' α and β back into every domain's; `widen`: the working α and β
  /// become the full ones again (every domain bounded from here on).
  void write_back(bool widen) {
    for (size_t r = 0; r < alpha.size(); ++r) {
      full_alpha_[r].index_copy_(1, keep, alpha[r].detach());
      full_beta_[r].index_copy_(1, keep, beta[r].detach());
      if (widen) {
        alpha[r] = full_alpha_[r];
        beta[r] = full_beta_[r];
      }
    }
  }

  /// Keeps `rows` (positions within `keep`) of every working tensor and of Adam's moments.
  void narrow_to(const at::Tensor& rows) {
    c10::NoGradGuard no_grad;
    keep = keep.index_select(0, rows);
    const auto cut = [&](const Interval& i) {
      return Interval{i.lower.index_select(0, rows), i.upper.index_select(0, rows)};
    };
    for (size_t r = 0; r < alpha.size(); ++r) {
      pre[r] = cut(pre[r]);
      split[r] = split[r].index_select(0, rows);
      alpha[r] = alpha[r].detach().index_select(1, rows).requires_grad_(true);
      beta[r] = beta[r].detach().index_select(1, rows).requires_grad_(true);
    }
    optimiser.set_params(alpha_group_, of_kind(alpha, true));
    optimiser.set_params(general_group_, of_kind(alpha, false));
    optimiser.set_params(beta_group_, beta);
    for (auto& [i, b] : other) b = cut(b);
    box = {box.lower.index_select(0, rows), box.upper.index_select(0, rows)};
    optimiser.select(1, rows);
  }

  /// Every domain again, each with its latest α and β (the recorded last pass).
  void widen_to_all() {
    pre = all_.pre;
    split = all_.split;
    other = all_other_;
    box = all_.box;
    write_back(true);
    keep = at::arange(int64_t(all_.box.lower.size(0)), keep.options());
  }

  at::Tensor keep;  // [B'] batch positions
  std::vector<Interval> pre;
  std::vector<at::Tensor> split;
  std::vector<std::pair<int, Interval>> other;
  InputBox box;
  std::vector<at::Tensor> alpha, beta;
  RelaxationOptimiser optimiser;

 private:
  const Batch& all_;
  std::vector<std::pair<int, Interval>> all_other_;
  std::vector<at::Tensor> full_alpha_, full_beta_;
  /// The α of the ReLUs (`slope`) or of the general nodes.
  [[nodiscard]] std::vector<at::Tensor> of_kind(const std::vector<at::Tensor>& a,
                                                bool slope) const {
    std::vector<at::Tensor> out;
    for (size_t r = 0; r < a.size(); ++r) {
      if (slopes_[r] == slope) out.push_back(a[r]);
    }
    return out;
  }

  std::vector<bool> slopes_;
  size_t alpha_group_ = 0;
  size_t general_group_ = 0;
  size_t beta_group_ = 0;
};

}  // namespace

DomainBounder::DomainBounder(const BoundGraph& g, const ReluLayout& layout,
                             const Objective& objective, const BabOptions& options,
                             const BoundOptions& bound_options, Checkpoint checkpoint, InputBox box,
                             collective::CommPtr share)
    : g_(g),
      layout_(layout),
      obj_(objective),
      o_(options),
      bo_(bound_options),
      passes_(PassContext::stopping_at(std::move(checkpoint))),
      box_(std::move(box)),
      share_(std::move(share)) {
  if (o_.passes != PassPath::kPlanned || share_ || obj_.C.size(0) == 0 || layout_.any_general() ||
      !layout_.other_pre().empty()) {
    return;
  }
  std::string unplanned;  // why CrownEngine's passes run instead
  planned_ = PlannedBeta::plan(g_, obj_.C, box_, unplanned);
  std::vector<int> relus;
  for (size_t r = 0; r < layout_.size(); ++r) relus.push_back(layout_.relu(r));
  if (planned_ && planned_->relus() != relus) planned_.reset();
}

int64_t DomainBounder::group_max(int64_t n) const {
  at::Tensor t = at::full({1}, n, at::TensorOptions().dtype(at::kLong).device(g_.device()));
  share_->all_reduce(t, collective::ReduceOp::kMax);
  return t.item<int64_t>();
}

Bounded DomainBounder::bound(std::vector<Domain>& ds, int iterations, bool optimise,
                             bool values_only) {
  if (!share_) return bound_here(ds, iterations, optimise, values_only);
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
  Bounded b = bound_here(part, iterations, optimise, values_only, n);
  bounded_ = counted + n;
  for (int64_t i = 0; i < n; ++i) ds[size_t(i)] = std::move(part[size_t(i)]);
  b.values = b.values.narrow(0, 0, n);
  b.lower = b.lower.narrow(0, 0, n);
  if (b.input_A.defined()) b.input_A = b.input_A.narrow(1, 0, n);
  return b;
}

namespace {

// The bounds of node `node` in a batch: an entry's (b.pre) or another relaxed node's input's.
const Interval& batch_bounds(int node, const Batch& b, const ReluLayout& layout,
                             const std::vector<std::pair<int, Interval>>& other) {
  for (size_t r = 0; r < layout.size(); ++r) {
    if (layout.pre(r) == node) return b.pre[r];
  }
  for (const auto& [i, bounds] : other) {
    if (i == node) return bounds;
  }
  throw Error("internal: no bounds of a product's operand in the batch");
}

// What the bound gains per unit of height from splitting each element of product operand r
// ([K, B, N]): its element x enters product terms x·y, each relaxed by McCormick planes within
// w_x·w_y/4 of the product (w: interval widths), and halving x's interval about halves that.
// The op's CROWN step with the other operand fixed at its width ([w, w]) maps |A| on the output
// to Σ_terms |A|·w_y at x (both planes' slope in x is y_l for A ≥ 0; in y, x_l): general_scores
// with height w_x then gives mean_k Σ_terms |A_k|·w_x·w_y / 4.
at::Tensor operand_A(size_t r, const at::Tensor& A, const Batch& b, const ReluLayout& layout,
                     const std::vector<std::pair<int, Interval>>& other, const BoundGraph& g) {
  c10::NoGradGuard no_grad;
  const GraphNode& n = g.node(layout.relu(r));
  const int k = layout.input(r);
  const Interval& mine = b.pre[r];
  const Interval& partner = batch_bounds(n.inputs.at(size_t(1 - k)), b, layout, other);
  const at::Tensor w = (partner.upper - partner.lower).nan_to_num(0, 0, 0);
  const Interval fixed{w, w};
  const Interval* in[2] = {k == 0 ? &mine : &fixed, k == 0 ? &fixed : &mine};
  BiasPair bias;
  BoundA out;
  out.lA = A.abs();
  return n.op->backward(out, in, bias).at(size_t(k)).lA;
}

// The branching scores of a recorded batch (branching.hpp): BaBSR's score and intercept score of
// each free unstable neuron, over the spec rows that still matter (joined disjuncts drop those
// proved on the domain); every neuron's, as domains keep them (one AllGather under TP):
// [B, 2, N_all].
at::Tensor branching_scores(const Batch& b, const std::vector<at::Tensor>& relu_A,
                            const at::Tensor& best, const Objective& obj, const ReluLayout& layout,
                            bool take_max, const BoundGraph& g,
                            const std::vector<std::pair<int, Interval>>& other) {
  const int64_t K = obj.rhs.size(0);
  const int64_t B = best.size(0);
  const size_t R = layout.size();
  const at::Tensor row_weight = open_rows(obj, best).t().reshape({K, B, 1});  // [K, B, 1]
  std::vector<std::pair<at::Tensor, size_t>> scores;  // per ReLU: score, intercept, [B, *shape]
  for (size_t r = 0; r < R; ++r) {
    const at::Tensor l = b.pre[r].lower.reshape({B, -1});
    const at::Tensor u = b.pre[r].upper.reshape({B, -1});
    const auto shape = b.pre[r].lower.sizes();
    // The rows' A at the node's output; at a product's operand, mapped through the product.
    const at::Tensor A =
        !relu_A[r].defined()
            ? at::zeros({K, B, l.size(1)}, best.options())
            : (layout.operand(r) ? operand_A(r, relu_A[r].slice(0, 0, K), b, layout, other, g)
                                 : relu_A[r].slice(0, 0, K))
                  .reshape({K, B, -1});
    if (layout.general(r)) {
      // Split again and again (each side narrower); no intercept score: BaBSR's own decides
      // among ReLUs when the general scores carry no information. The height: the op's IBP
      // output's, a product operand's own width (operand_A).
      at::Tensor height;
      if (layout.operand(r)) {
        height = (u - l).nan_to_num(0, 0, 0);
      } else {
        const Interval* in[] = {&b.pre[r]};
        const Interval out = g.node(layout.relu(r)).op->ibp(in);
        height = (out.upper - out.lower).reshape({B, -1});
      }
      const at::Tensor sc = general_scores(A, row_weight, l, u, height);
      scores.emplace_back(
          (sc + at::where(sc >= 0, 1e-9 * (u - l), at::zeros_like(sc))).reshape(shape), r);
      scores.emplace_back(at::where(sc >= 0, at::zeros_like(sc), sc).reshape(shape), r);
      continue;
    }
    const BabsrScores sc = babsr_scores(A, row_weight, l, u, layout.bias(r), take_max);
    const at::Tensor free = (l < 0) & (u > 0) & (b.split[r].reshape({B, -1}) == 0);
    const at::Tensor none = at::full_like(l, kUnsplittable);
    // Tie-break toward wide intervals so that neurons without a score are still ordered.
    scores.emplace_back(at::where(free, sc.score + 1e-9 * (u - l), none).reshape(shape), r);
    scores.emplace_back(at::where(free, -sc.intercept, none).reshape(shape), r);
  }
  const std::vector<at::Tensor> w = layout.whole(scores);
  std::vector<at::Tensor> per_relu;
  for (size_t r = 0; r < R; ++r) {
    per_relu.push_back(at::stack({w[2 * r].reshape({B, -1}), w[2 * r + 1].reshape({B, -1})}, 1));
  }
  return at::cat(per_relu, 2).to(at::kFloat);
}

// Writes a bounded batch into its domains: each value (floored at the parent's when
// `optimise`), α and β ([K, B, *shape] per ReLU, every neuron), scores ([B, 2, N_all], or
// undefined) and the bounds refreshed after layer `refresh_after`.
void store(std::vector<Domain>& ds, const at::Tensor& values, const Batch& b,
           const at::Tensor& scores, size_t refresh_after, const ReluLayout& layout,
           bool optimise) {
  const size_t R = layout.size();
  std::vector<std::pair<at::Tensor, size_t>> params_of;
  for (size_t r = 0; r < R; ++r) {
    params_of.emplace_back(b.alpha[r], r);
    params_of.emplace_back(b.beta[r], r);
  }
  const std::vector<at::Tensor> params = layout.whole(params_of);
  const at::Tensor v = values.to(at::kDouble).contiguous();
  for (size_t k = 0; k < ds.size(); ++k) {
    Domain& d = ds[k];
    const double value = v[int64_t(k)].item<double>();
    d.value = optimise ? std::max(value, d.floor) : value;
    for (size_t r = 0; r < R; ++r) {
      d.alpha[r] = params[2 * r].detach().narrow(1, int64_t(k), 1).clone();
      d.beta[r] = params[2 * r + 1].detach().narrow(1, int64_t(k), 1).clone();
    }
    if (scores.defined()) d.score = scores[int64_t(k)].clone();
  }
  std::vector<std::pair<at::Tensor, size_t>> refreshed;
  for (size_t r = refresh_after + 1; r < R; ++r) {
    refreshed.emplace_back(b.pre[r].lower, r);
    refreshed.emplace_back(b.pre[r].upper, r);
  }
  const std::vector<at::Tensor> bounds = layout.whole(refreshed);
  for (size_t r = refresh_after + 1, k = 0; r < R; ++r, k += 2) {
    for (size_t i = 0; i < ds.size(); ++i) {
      ds[i].lower[r] = bounds[k].narrow(0, int64_t(i), 1).clone();
      ds[i].upper[r] = bounds[k + 1].narrow(0, int64_t(i), 1).clone();
    }
  }
}

}  // namespace

Bounded DomainBounder::bound_here(std::vector<Domain>& ds, int iterations, bool optimise,
                                  bool values_only, std::optional<int64_t> real) {
  if (planned_) return bound_planned(ds, iterations, optimise, values_only);
  const auto B = int64_t(ds.size());
  const size_t R = layout_.size();
  Batch batch = gather(ds, layout_, box_, g_, optimise);
  SplitHook hook(g_.output(), layout_);
  const size_t refresh_after = optimise && o_.intermediate == BabIntermediate::kRefresh
                                   ? earliest_split(batch.whole_split)
                                   : R;
  const bool prune = optimise && !o_.deterministic;
  std::vector<bool> slopes;
  for (size_t r = 0; r < R; ++r) slopes.push_back(!layout_.general(r));
  Working w(batch, refresh(batch, g_, layout_, bo_, refresh_after), prune, o_, std::move(slopes));
  at::Tensor best;  // [B, K]
  Bounded out;
  const int passes = std::max(1, optimise ? iterations : 1);
  for (int it = 0; it < passes; ++it) {
    const bool last = it + 1 == passes;
    if (last && w.keep.size(0) < B) w.widen_to_all();
    c10::AutoGradMode grad(optimise && !last);
    project_general_alpha(w.alpha, w.pre, layout_, g_);
    CrownEngine engine(g_, w.box, bo_, passes_);
    for (size_t r = 0; r < R; ++r) engine.set_bounds(layout_.pre(r), w.pre[r]);
    for (const auto& [i, b] : w.other) engine.set_bounds(i, b);
    hook.alpha = w.alpha;
    hook.beta_signed.clear();
    hook.point.clear();
    for (size_t r = 0; r < R; ++r) {
      hook.beta_signed.push_back(w.beta[r] * w.split[r]);
      hook.point.push_back(layout_.general(r)
                               ? at::where(w.split[r] > 0, w.pre[r].upper, w.pre[r].lower)
                               : at::Tensor());
    }
    hook.record = last && !values_only;
    engine.set_hook(&hook);
    const at::Tensor lb = engine.output_bounds(obj_.C, true, false).lower;  // [B', K]
    if (!best.defined()) {
      best = lb.detach().clone();
    } else {
      best.index_copy_(0, w.keep, at::maximum(best.index_select(0, w.keep), lb.detach()));
    }
    if (last) {
      out.recorded = !values_only;
      break;
    }
    if (passes_.checkpoint.deadline.expired()) break;
    at::Tensor open = domain_values(obj_, best.index_select(0, w.keep)) <= 0;  // [B']
    if (real) open = open & (w.keep < *real);  // padding leaves with the proved
    const int64_t n_open = open.sum().item<int64_t>();
    int64_t open_in_group = n_open;
    if (share_) {  // the shares leave the optimisation together (their passes stay in step)
      at::Tensor count = open.sum().reshape({1});
      share_->all_reduce(count, collective::ReduceOp::kSum);
      open_in_group = count.item<int64_t>();
    }
    if (!o_.deterministic && open_in_group == 0) break;
    const at::Tensor loss = -lb.sum();
    if (!loss.requires_grad()) break;  // nothing to optimise (no split multiplier reached it)
    w.optimiser.step(loss);
    // n_open > 0: a spec-parallel share whose domains are all proved keeps them while the
    // group's others are open (a pass needs a domain; its steps stay in step with the group's).
    if (prune && n_open > 0 && double(w.keep.size(0) - n_open) >= 0.2 * double(w.keep.size(0))) {
      w.write_back(false);
      w.narrow_to(open.nonzero().squeeze(1).to(w.keep.device()));
    }
  }
  if (w.keep.size(0) < B) w.write_back(true);  // left the loop early: each domain's latest α, β
  bounded_ += B;
  out.lower = best;
  out.values = domain_values(obj_, best);  // [B]
  if (values_only) return out;
  batch.alpha = w.alpha;
  batch.beta = w.beta;
  const at::Tensor scores =
      out.recorded ? branching_scores(batch, hook.relu_A, best, obj_, layout_,
                                      o_.branching_reduce == BranchingReduce::kMax, g_, w.other)
                   : at::Tensor();
  store(ds, out.values, batch, scores, refresh_after, layout_, optimise);
  out.input_A = hook.input_A;
  return out;
}

// The same search through the plan: each domain's α and β optimised by the planned passes and
// their closed-form gradients (methods/planned_beta.hpp). Without --deterministic a domain leaves
// the optimisation as soon as it is proved (its bounds and parameters do not depend on the
// others', so the open domains' optimisation is the same), and the recorded pass bounds the open
// ones only (the proved are never queued).
Bounded DomainBounder::bound_planned(std::vector<Domain>& ds, int iterations, bool optimise,
                                     bool values_only) {
  const auto B = int64_t(ds.size());
  const size_t R = layout_.size();
  Batch batch = gather(ds, layout_, box_, g_, false);
  const size_t refresh_after = optimise && o_.intermediate == BabIntermediate::kRefresh
                                   ? earliest_split(batch.whole_split)
                                   : R;
  refresh(batch, g_, layout_, bo_, refresh_after);  // a chain has no other relaxed node
  std::vector<at::Tensor> lower;
  std::vector<at::Tensor> upper;
  for (const Interval& i : batch.pre) {
    lower.push_back(i.lower);
    upper.push_back(i.upper);
  }
  planned_->load({B, &lower, &upper, &batch.split, &batch.alpha, &batch.beta}, optimise);
  const bool prune = optimise && !o_.deterministic;
  std::vector<int64_t> active(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) active[size_t(i)] = i;
  const auto long_options = at::TensorOptions().dtype(at::kLong);
  at::Tensor best;  // [B, K]
  Bounded out;
  const int passes = std::max(1, optimise ? iterations : 1);
  for (int it = 0; it < passes; ++it) {
    const bool last = it + 1 == passes;
    passes_.checkpoint();
    const at::Tensor lb = planned_->pass(active, last && !values_only);  // [active, K]
    const at::Tensor rows = at::tensor(active, long_options);
    if (!best.defined()) {
      best = lb;
    } else {
      best.index_copy_(0, rows, at::maximum(best.index_select(0, rows), lb));
    }
    if (last) {
      out.recorded = !values_only;
      break;
    }
    if (passes_.checkpoint.deadline.expired()) break;
    const at::Tensor open = domain_values(obj_, best.index_select(0, rows)) <= 0;  // [active]
    const int64_t n_open = open.sum().item<int64_t>();
    if (!o_.deterministic && n_open == 0) break;
    if (!planned_->movable()) break;  // nothing to optimise
    planned_->step(o_.lr_alpha, o_.lr_beta);
    if (prune && n_open < int64_t(active.size())) {
      const at::Tensor keep = open.contiguous();
      const bool* k = keep.data_ptr<bool>();
      std::vector<int64_t> still;
      for (size_t i = 0; i < active.size(); ++i) {
        if (k[i]) still.push_back(active[i]);
      }
      active = std::move(still);
    }
  }
  bounded_ += B;
  out.lower = best;
  out.values = domain_values(obj_, best);  // [B]
  if (values_only) return out;
  if (optimise) planned_->alpha_beta(batch.alpha, batch.beta);
  std::vector<at::Tensor> relu_A;
  if (out.recorded) {
    for (size_t r = 0; r < R; ++r) relu_A.push_back(planned_->relu_A(r));
    std::vector<int64_t> in_shape{obj_.C.size(0)};
    in_shape.insert(in_shape.end(), g_.input_shape().begin(), g_.input_shape().end());
    in_shape[1] = B;
    out.input_A = planned_->input_A().reshape(in_shape);
  }
  const at::Tensor scores =
      out.recorded ? branching_scores(batch, relu_A, best, obj_, layout_,
                                      o_.branching_reduce == BranchingReduce::kMax, g_, {})
                   : at::Tensor();
  store(ds, out.values, batch, scores, refresh_after, layout_, optimise);
  return out;
}

}  // namespace distcrown::bab::detail
