#include "distcrown/methods/crown.hpp"

#include <map>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "backward_walk.hpp"
#include "distcrown/collective/autograd.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/util/error.hpp"
#include "row_align.hpp"

namespace distcrown {
namespace {

// Where a CROWN bound is not finite (a relaxation line past the dtype's range gives its row an
// infinite bound, ops/elementwise_lines.hpp), the reference's (IBP): both are sound, and the
// finite CROWN bounds stay as they are. An undefined side (not asked for) stays undefined.
Interval finite_or(Interval b, const Interval& reference) {
  if (all_finite(b)) return b;
  const auto pick = [](const at::Tensor& t, const at::Tensor& r) {
    return t.defined() ? at::where(at::isfinite(t), t, r) : t;
  };
  return {pick(b.lower, reference.lower), pick(b.upper, reference.upper)};
}

// Adds b into a (A matrices reaching one node along several paths). Keeps lA and uA one tensor
// while both sides are the same tensor, so the shared prefix of a backward pass is computed once.
void add_into(BoundA& a, const BoundA& b) {
  const bool a_shared = a.lA.defined() && a.lA.is_same(a.uA);
  const bool b_shared = b.lA.defined() && b.lA.is_same(b.uA);
  if (a_shared && b_shared) {
    a.lA = a.lA + b.lA;
    a.uA = a.lA;
    return;
  }
  accumulate(a.lA, b.lA);
  accumulate(a.uA, b.uA);
}

// Rows [r, B, *shape] of a start matrix (shape: the node's, n of its elements per batch
// element). One-hot neuron rows: A[j, b, rows[j]] = 1.
at::Tensor one_hot_rows(const at::Tensor& rows, const std::vector<int64_t>& shape, int64_t n,
                        int64_t B, const at::TensorOptions& options) {
  const int64_t k = rows.numel();
  at::Tensor eye = at::zeros({k, B, n}, options);
  eye.scatter_(2, rows.to(options.device()).reshape({k, 1, 1}).expand({k, B, 1}), 1.0);
  std::vector<int64_t> full{k, B};
  full.insert(full.end(), shape.begin() + 1, shape.end());
  return eye.reshape(full);
}

// Per-element one-hot rows: A[j, b, rows[j, b]] = 1 (rows [r, B]), as [r, B, *shape[1:]].
at::Tensor one_hot_element_rows(const at::Tensor& rows, const std::vector<int64_t>& shape,
                                int64_t n, const at::TensorOptions& options) {
  at::Tensor eye = at::zeros({rows.size(0), rows.size(1), n}, options);
  eye.scatter_(2, rows.unsqueeze(2), 1.0);
  std::vector<int64_t> full{rows.size(0), rows.size(1)};
  full.insert(full.end(), shape.begin() + 1, shape.end());
  return eye.reshape(full);
}

}  // namespace

CrownEngine::CrownEngine(const BoundGraph& g, InputBox box, BoundOptions options,
                         PassContext context)
    : g_(g),
      box_(std::move(box)),
      opt_(options),
      checkpoint_(std::move(context.checkpoint)),
      spec_comm_(std::move(context.spec_comm)),
      bounds_(size_t(g.size())),
      reference_(size_t(g.size())) {
  if (opt_.crown_batch_size < 0) throw InvalidArgument("crown batch size must be >= 0");
  // Tensor parallelism: every rank must bound the same rows (a zone's AllReduce sums each row's
  // shares), which spec-parallel splitting would break.
  for (int i = 1; spec_comm_ && spec_comm_->size() > 1 && i < g.size(); ++i) {
    if (g.node(i).op->output_shard() != nullptr) {
      throw InvalidArgument(spec_parallel_tensor_parallel_refusal());
    }
  }
  bounds_[0] = box_;
}

namespace {

// Takes the engine's hook away for a scope (when `pause`), and gives it back however the scope
// ends.
class HookPause {
 public:
  HookPause(RelaxationHook*& hook, bool pause)
      : hook_(hook), saved_(pause ? std::exchange(hook, nullptr) : hook) {}
  ~HookPause() { hook_ = saved_; }
  HookPause(const HookPause&) = delete;
  HookPause& operator=(const HookPause&) = delete;

 private:
  RelaxationHook*& hook_;
  RelaxationHook* saved_;
};

}  // namespace

void CrownEngine::compute_intermediate_bounds() {
  std::vector<const Interval*> args;
  for (int i = 1; i < g_.size(); ++i) {
    if (i == g_.output()) continue;    // bounded by output_bounds() with the spec
    if (bounds_[size_t(i)]) continue;  // given by set_bounds()
    checkpoint_();                     // may throw DeadlineReached
    args.clear();
    for (int p : g_.node(i).inputs) args.push_back(&*bounds_[size_t(p)]);
    // The reference: given bounds, else one IBP step from the bounds so far (auto_LiRPA uses
    // aux_reference_bounds in place of IBP, not intersected with it).
    Interval reference = reference_[size_t(i)] ? *reference_[size_t(i)] : g_.node(i).op->ibp(args);
    if (g_.is_pre_activation(i) && !g_.affine_from_input(i)) {
      const OutputShard* shard = g_.node(i).op->output_shard();
      Interval b;
      // A start the hook leaves out: CROWN's relaxations, no autograd (constant bounds).
      const bool constant = hook_ != nullptr && !hook_->optimises(i);
      std::optional<c10::NoGradGuard> no_grad;
      if (constant) no_grad.emplace();
      const HookPause pause(hook_, constant);
      if (shard == nullptr) {
        b = refine(i, reference);
      } else if (opt_.sharded_intermediate == ShardedIntermediate::kCrown) {
        b = refine_sharded(i, reference, *shard);
      } else {
        b = reference;  // `tp`: IBP inside sharded zones
      }
      if (intersect_reference_ && reference_[size_t(i)]) {
        b = {at::maximum(b.lower, reference.lower), at::minimum(b.upper, reference.upper)};
      }
      bounds_[size_t(i)] = finite_or(std::move(b), reference);
    } else {
      bounds_[size_t(i)] = std::move(reference);
    }
  }
}

Interval CrownEngine::refine(int i, const Interval& reference) {
  const int64_t B = reference.lower.size(0);
  const int64_t n = g_.node_numel(i);
  const at::Tensor lo = reference.lower.reshape({B, n});
  const at::Tensor hi = reference.upper.reshape({B, n});
  // Rows of each element's own neurons: only when no relaxation hook reads which neurons a
  // pass's rows are (α-CROWN's α are per row), and for dense passes.
  const bool rows_per_element = (hook_ == nullptr || !hook_->reads_rows()) && !uses_patches(i);
  // kTightUnstable where it can give each element its rows; elsewhere it is kTight.
  const bool unstable_only = opt_.scheme == IntermediateScheme::kTightUnstable &&
                             rows_per_element && g_.feeds_splittable(i);
  if (intersects_ibp(opt_.scheme) && !unstable_only) {
    const Interval c = neuron_rows(i, at::arange(n, index_options()));
    return {at::maximum(c.lower, lo).reshape(reference.lower.sizes()),
            at::minimum(c.upper, hi).reshape(reference.upper.sizes())};
  }
  if (!g_.feeds_splittable(i) || opt_.scheme == IntermediateScheme::kEvery) {
    // Before an S-shaped function every neuron gets CROWN bounds, not intersected with the
    // reference (as auto_LiRPA): stability at zero does not make its relaxation exact. The
    // `every` scheme does so before a ReLU too.
    const Interval c = neuron_rows(i, at::arange(n, index_options()));
    return {c.lower.reshape(reference.lower.sizes()), c.upper.reshape(reference.upper.sizes())};
  }
  const at::Tensor unstable_each = (lo < 0) & (hi > 0);  // [B, n]
  if ((B > 1 || unstable_only) && rows_per_element) {
    // A batch of sub-domains (branch and bound): each element bounds its own unstable neurons
    // (as it would alone), in as many rows as the most any element has, not the union's.
    const int64_t k_each = unstable_each.sum(1).max().item<int64_t>();
    if (k_each == 0) return reference;
    Interval c = refine_each(i, reference, unstable_each, k_each);
    if (!unstable_only) return c;
    return {at::maximum(c.lower, reference.lower), at::minimum(c.upper, reference.upper)};
  }
  // Unstable under the reference in any batch element.
  const at::Tensor rows = unstable_each.any(0).nonzero().reshape({-1});
  const int64_t k = rows.numel();
  if (k == 0) return reference;
  if (double(k) > opt_.minimum_sparsity * double(n)) {
    const Interval c = neuron_rows(i, at::arange(n, index_options()));
    return {c.lower.reshape(reference.lower.sizes()), c.upper.reshape(reference.upper.sizes())};
  }
  const Interval c = neuron_rows(i, rows);
  at::Tensor new_lo = lo.clone();
  at::Tensor new_hi = hi.clone();
  new_lo.index_copy_(1, rows, c.lower);
  new_hi.index_copy_(1, rows, c.upper);
  return {new_lo.reshape(reference.lower.sizes()), new_hi.reshape(reference.upper.sizes())};
}

Interval CrownEngine::refine_each(int i, const Interval& reference, const at::Tensor& unstable,
                                  int64_t k) {
  const int64_t B = reference.lower.size(0);
  const int64_t n = g_.node_numel(i);
  const at::Tensor lo = reference.lower.reshape({B, n});
  const at::Tensor hi = reference.upper.reshape({B, n});
  // Each element's unstable neurons first, padded with stable ones that keep the reference.
  const auto [flag, idx] = at::topk(unstable.to(lo.scalar_type()), k, 1);  // [B, k]
  const at::Tensor rows = idx.t().contiguous();                            // [k, B]
  const auto& shape = g_.node(i).shape;
  const Interval c = bound_rows(i, k, [&](const at::Tensor& sel) {
    return one_hot_element_rows(rows.index_select(0, sel), shape, n, lo.options());
  });  // [B, k]
  const at::Tensor keep = flag > 0;
  const at::Tensor new_lo = lo.scatter(1, idx, at::where(keep, c.lower, lo.gather(1, idx)));
  const at::Tensor new_hi = hi.scatter(1, idx, at::where(keep, c.upper, hi.gather(1, idx)));
  return {new_lo.reshape(reference.lower.sizes()), new_hi.reshape(reference.upper.sizes())};
}

Interval CrownEngine::neuron_rows(int start, const at::Tensor& rows) {
  if (uses_patches(start)) {  // spread as bound_rows() spreads dense passes
    return spread_rows(
        start, rows.numel(),
        [&](const at::Tensor& idx) { return patches_rows(start, rows.index_select(0, idx)); }, rows,
        Sides{});
  }
  const auto& shape = g_.node(start).shape;
  const int64_t n = g_.node_numel(start);
  const int64_t B = box_.lower.size(0);
  const auto options = box_.lower.options();
  return bound_rows(
      start, rows.numel(),
      [&](const at::Tensor& idx) {
        return one_hot_rows(rows.index_select(0, idx), shape, n, B, options);
      },
      rows);
}

const std::vector<Interval>& CrownEngine::centre_values() {
  if (centre_.empty()) {
    // Constants of the relaxation: no gradient flows through the reference point.
    c10::NoGradGuard no_grad;
    const std::vector<at::Tensor> v = g_.forward_values((box_.lower + box_.upper) / 2);
    centre_.reserve(v.size());
    for (const at::Tensor& t : v) centre_.push_back({t, t});
  }
  return centre_;
}

at::TensorOptions CrownEngine::index_options() const {
  return at::TensorOptions().dtype(at::kLong).device(box_.lower.device());
}

Interval CrownEngine::bound_rows(int start, int64_t k, const RowMaker& make_rows,
                                 const at::Tensor& row_ids, Sides sides) {
  return spread_rows(
      start, k,
      [&](const at::Tensor& idx) { return chunked(start, idx, make_rows, row_ids, sides); },
      row_ids, sides);
}

Interval CrownEngine::spread_rows(int start, int64_t k, const PartBounder& part,
                                  const at::Tensor& row_ids, Sides sides) {
  const int P = spec_comm_ ? spec_comm_->size() : 1;
  if (P == 1) return part(at::arange(k, index_options()));
  // The positions (0..k-1) each rank bounds, in order. Without a hook rank r takes the block
  // [r·block, (r+1)·block), block a multiple of kRowAlign. With one (α-/β-CROWN) rank r takes the
  // rows whose ids it owns (owned_rows), so the relaxation parameters of a row live on one rank
  // whichever rows a pass asks for: the hook stores only this rank's rows.
  std::vector<at::Tensor> positions(static_cast<size_t>(P));  // CPU LongTensor per rank
  int64_t most = 0;
  if (hook_ == nullptr) {
    const int64_t block = ((k + P - 1) / P + kRowAlign - 1) / kRowAlign * kRowAlign;
    for (int r = 0; r < P; ++r) {
      positions[size_t(r)] = at::arange(std::min(k, block * r), std::min(k, block * (r + 1)),
                                        at::TensorOptions().dtype(at::kLong));
    }
  } else {
    // Ids of the rows: neuron indices of an intermediate start, spec rows (= positions) of the
    // output; `n` ids in all.
    const at::Tensor ids = row_ids.defined() ? row_ids.cpu() : at::arange(k, at::kLong);
    const int64_t n = row_ids.defined() ? g_.node_numel(start) : k;
    for (int r = 0; r < P; ++r) {
      const RowRange own = owned_rows(n, P, r);
      positions[size_t(r)] = ((ids >= own.begin) & (ids < own.end)).nonzero().reshape({-1});
    }
  }
  for (const at::Tensor& p : positions) most = std::max(most, p.numel());
  // Every rank pads its rows to `per` by repeating a row (its last, or row 0 when it has none), so
  // all ranks run the same passes and make the same collective calls (FSDP gathers inside them,
  // and the gradients' collectives) in the same order.
  const int64_t per = std::max<int64_t>((most + kRowAlign - 1) / kRowAlign * kRowAlign, kRowAlign);
  const at::Tensor& own = positions[size_t(spec_comm_->rank())];
  at::Tensor idx = own;
  if (own.numel() < per) {
    const int64_t filler = own.numel() > 0 ? own[own.numel() - 1].item<int64_t>() : 0;
    idx = at::cat({own, at::full({per - own.numel()}, filler, at::kLong)});
  }
  Interval local = part(idx.to(index_options().device()));
  // A side not wanted travels as zeros, so every rank gathers the same shapes.
  if (!local.lower.defined()) local.lower = at::zeros_like(local.upper);
  if (!local.upper.defined()) local.upper = at::zeros_like(local.lower);
  const int64_t B = local.lower.size(0);
  const at::Tensor mine = at::stack({local.lower, local.upper}).unsqueeze(0);  // [1, 2, B, per]
  // [P, 2, B, per]; with a hook the gradient flows back to the rank that computed each row.
  at::Tensor all;
  if (hook_ != nullptr) {
    all = collective::gather_from_ranks(backward_order_.tie(mine), spec_comm_);
    backward_order_.link(all);
  } else {
    all = at::empty({P, 2, B, per}, mine.options());
    spec_comm_->all_gather(mine.contiguous(), all);
  }
  // Where position j sits in [P·per]: rank r's i-th row at r·per + i.
  at::Tensor where = at::empty({k}, at::kLong);
  for (int r = 0; r < P; ++r) {
    const at::Tensor& p = positions[size_t(r)];
    if (p.numel() > 0) where.index_copy_(0, p, at::arange(p.numel(), at::kLong) + r * per);
  }
  // [P, 2, B, per] -> [2, B, P·per] -> the k rows in position order.
  const at::Tensor joined = all.permute({1, 2, 0, 3})
                                .reshape({2, B, P * per})
                                .index_select(2, where.to(index_options().device()));
  return {sides.lower ? joined[0].contiguous() : at::Tensor(),
          sides.upper ? joined[1].contiguous() : at::Tensor()};
}

int64_t CrownEngine::rows_per_pass(int start, int64_t k) const {
  if (opt_.crown_batch_size > 0) return opt_.crown_batch_size;
  const int64_t all = std::max<int64_t>(k, 1);
  if (opt_.pass_bytes <= 0) return all;
  int64_t widest = 1;
  for (int i = 0; i <= start; ++i) widest = std::max(widest, g_.node_numel(i));
  const int64_t per_row = 8 * widest * box_.lower.size(0) * int64_t(box_.lower.element_size());
  const int64_t fit = opt_.pass_bytes / per_row / kRowAlign * kRowAlign;
  return std::min(all, std::max(fit, kRowAlign));
}

Interval CrownEngine::chunked(int start, const at::Tensor& idx, const RowMaker& make_rows,
                              const at::Tensor& row_ids, Sides sides) {
  const int64_t k = idx.numel();
  const int64_t chunk = rows_per_pass(start, k);
  std::vector<at::Tensor> lower;
  std::vector<at::Tensor> upper;
  for (int64_t s = 0; s < k; s += chunk) {
    const int64_t rows = std::min(k, s + chunk) - s;
    const at::Tensor slice = idx.slice(0, s, s + rows);
    const at::Tensor pass_idx = opt_.align_rows ? pad_rows(slice) : slice;
    at::Tensor A = make_rows(pass_idx);
    BoundA a{sides.lower ? A : at::Tensor(), sides.upper ? A : at::Tensor()};
    A = at::Tensor();  // the pass owns the start matrix and frees it after its first step
    const at::Tensor ids = row_ids.defined() ? row_ids.index_select(0, pass_idx) : pass_idx;
    Interval part = backward_from(start, std::move(a), ids);  // [B, rows padded]
    if (sides.lower) lower.push_back(part.lower.slice(1, 0, rows));
    if (sides.upper) upper.push_back(part.upper.slice(1, 0, rows));
  }
  const auto join = [](const std::vector<at::Tensor>& parts) {
    if (parts.empty()) return at::Tensor();
    return parts.size() == 1 ? parts.front() : at::cat(parts, 1);
  };
  return {join(lower), join(upper)};
}

void CrownEngine::watch_deadline(const at::Tensor& A) const {
  if (A.defined() && A.requires_grad()) {
    // α/β optimisation's autograd backward retraces this pass: it stops at the deadline too.
    A.register_hook([check = checkpoint_](const at::Tensor& /*grad*/) { check(); });
  }
}

void CrownEngine::step_inputs(const GraphNode& node, std::vector<const Interval*>& in_bounds) {
  in_bounds.clear();
  for (int p : node.inputs) {
    const auto& b = bounds_[size_t(p)];
    if (node.op->needs_input_bounds() && !b) {
      throw Error("internal: bounds of node '" + g_.node(p).name + "' needed before computed");
    }
    in_bounds.push_back(b ? &*b : nullptr);
  }
  // The forward values at the box centre follow the input bounds.
  if (node.op->traits().needs_centre_values) {
    const std::vector<Interval>& centre = centre_values();
    for (int p : node.inputs) in_bounds.push_back(&centre[size_t(p)]);
  }
}

std::vector<BoundA> CrownEngine::dense_step(int start, int i, const BoundA& here,
                                            std::span<const Interval* const> in_bounds,
                                            BiasPair& bias, const at::Tensor& rows, bool observe) {
  const BoundNode& op = *g_.node(i).op;
  const bool point_split = hook_ != nullptr && hook_->splits_at_points(i);
  if (hook_ == nullptr || !(op.has_relaxation_params() || point_split)) {
    return op.backward(here, in_bounds, bias);
  }
  const int64_t r = here.lA.defined() ? here.lA.size(0) : here.uA.size(0);
  const at::Tensor ids = rows.defined() ? rows : at::arange(r, index_options());
  if (observe) hook_->observe(start, i, here);
  RelaxParams p = hook_->params(start, i, ids, in_bounds);
  if (!op.traits().reads_alpha_source) p = resolved_alpha(std::move(p));
  if (!point_split) return op.backward_relaxed(here, in_bounds, bias, p);
  // Splits at points: the node's own relaxation (over the split intervals, in in_bounds), then
  // the Lagrangian term of each s·(z − p) ≤ 0: β·s on that input's lA, −β·s·p into the lower
  // bias. beta [r, batch, *in_shape], point [batch, *in_shape].
  const std::vector<PointSplit> splits = std::move(p.point_splits);  // the op must not add β
  std::vector<BoundA> out = op.has_relaxation_params()
                                ? op.backward_relaxed(here, in_bounds, bias, p)
                                : op.backward(here, in_bounds, bias);
  for (const PointSplit& s : splits) {
    BoundA& in = out.at(size_t(s.input));
    if (!s.beta.defined() || !in.lA.defined()) continue;
    in.lA = in.lA + s.beta;
    const at::Tensor c = (s.beta * s.point).reshape({r, s.point.size(0), -1}).sum(2);  // [r, B]
    bias.lower = bias.lower.defined() ? bias.lower - c : -c;
  }
  return out;
}

Interval CrownEngine::backward_from(int start, BoundA a, const at::Tensor& rows) {
  std::map<int, BoundA> pending;  // A matrices waiting at a node, [spec, batch, *shape]
  pending.emplace(start, std::move(a));
  BiasPair bias;
  std::vector<const Interval*> in_bounds;
  walk_backward(
      g_, start, pending, checkpoint_,
      [&](int i, const GraphNode& node, const BoundA& here) {
        watch_deadline(here.lA);
        step_inputs(node, in_bounds);
        return dense_step(start, i, here, in_bounds, bias, rows, true);
      },
      [](BoundA& /*a*/, int /*node*/) {},
      [](BoundA& slot, const BoundA& in, int /*node*/) { add_into(slot, in); });
  const auto it = pending.find(0);
  if (it == pending.end()) throw Error("internal: backward pass did not reach the input");
  if (hook_ != nullptr) hook_->observe(start, 0, it->second);
  const int64_t spec = it->second.lA.defined() ? it->second.lA.size(0) : it->second.uA.size(0);
  const int64_t B = box_.lower.size(0);
  // A pass where no term reached the bias still yields [spec, B] bounds.
  if (!bias.lower.defined() && it->second.lA.defined())
    bias.lower = at::zeros({spec, B}, box_.lower.options());
  if (!bias.upper.defined() && it->second.uA.defined())
    bias.upper = at::zeros({spec, B}, box_.lower.options());
  return concretize(it->second, bias, box_);
}

Interval CrownEngine::output_ibp(const at::Tensor& C) const {
  const int out = g_.output();
  std::vector<const Interval*> args;
  for (int p : g_.node(out).inputs) args.push_back(&*bounds_[size_t(p)]);
  return apply_spec(g_.node(out).op->ibp(args), C);
}

Interval CrownEngine::output_bounds(const at::Tensor& C, bool lower, bool upper) {
  const int out = g_.output();
  const auto& shape = g_.node(out).shape;
  const int64_t B = box_.lower.size(0);
  const int64_t n = g_.node_numel(out);
  Interval result;
  const Sides sides{lower, upper};
  if (!C.defined()) {
    result = bound_rows(
        out, n,
        [&](const at::Tensor& idx) { return one_hot_rows(idx, shape, n, B, box_.lower.options()); },
        at::Tensor(), sides);
  } else {
    if (C.dim() != 2 || C.size(1) != n) {
      throw InvalidArgument("spec matrix C must be [spec, " + std::to_string(n) + "]");
    }
    const at::Tensor Cd = C.to(box_.lower.options());
    result = bound_rows(
        out, C.size(0),
        [&](const at::Tensor& idx) {
          // C rows [r, n] -> [r, B, *shape]
          const int64_t r = idx.numel();
          std::vector<int64_t> full{r, B};
          full.insert(full.end(), shape.begin() + 1, shape.end());
          return Cd.index_select(0, idx).reshape({r, 1, n}).expand({r, B, n}).reshape(full);
        },
        at::Tensor(), sides);
  }
  if (intersects_ibp(opt_.scheme)) {
    const Interval ibp = output_ibp(C);
    if (lower) result.lower = at::maximum(result.lower, ibp.lower);
    if (upper) result.upper = at::minimum(result.upper, ibp.upper);
  } else if (!all_finite(result)) {
    result = finite_or(std::move(result), output_ibp(C));
  }
  return result;
}

}  // namespace distcrown
