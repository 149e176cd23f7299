#include "distcrown/methods/alpha_crown.hpp"

#include <limits>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "methods/relaxation_optimiser.hpp"

namespace distcrown {
namespace {

Interval detached(const Interval& b) {
  return {b.lower.defined() ? b.lower.detach() : at::Tensor(),
          b.upper.defined() ? b.upper.detach() : at::Tensor()};
}

// Elementwise tighter of two sound bounds on the same quantity.
Interval tighter(const Interval& a, const Interval& b) {
  return {a.lower.defined() ? at::maximum(a.lower, b.lower) : at::Tensor(),
          a.upper.defined() ? at::minimum(a.upper, b.upper) : at::Tensor()};
}

// auto_LiRPA shares one α over the spatial positions of a convolutional start node ([C, H, W])
// with more than this many neurons unstable under CROWN (its use_full_conv_alpha_thresh): the
// rows of such a start's α are its channels.
constexpr int64_t kSharedAlphaThreshold = 512;

// The neurons of `b` ([B, *shape]) unstable in some batch element: [F] bool, F = numel / B.
at::Tensor unstable_in_any(const Interval& b) {
  return ((b.lower < 0) & (b.upper > 0)).reshape({b.lower.size(0), -1}).any(0);
}

// Feature-sparse α rows ([n, B, U]) with every position: [n, *P], `base` ([B, F]) where no α
// is held (P = [B, *shape], F its positions per batch element).
at::Tensor widen(const at::Tensor& rows, const at::Tensor& features, const at::Tensor& base,
                 const std::vector<int64_t>& shape) {
  std::vector<int64_t> out{rows.size(0)};
  out.insert(out.end(), shape.begin(), shape.end());
  return base.unsqueeze(0)
      .expand({rows.size(0), base.size(0), base.size(1)})
      .index_copy(2, features, rows)
      .view(out);
}

// Tensor bytes live on `device` (memory::usage), the most over the ranks of `in_step` (null:
// this rank's): one host-side all-gather.
int64_t live_bytes_in_step(const c10::Device& device, const collective::CommPtr& in_step) {
  const int64_t mine = memory::usage(device).live_bytes;
  if (!in_step || in_step->size() == 1) return mine;
  int64_t most = 0;
  for (const std::string& text : in_step->all_gather_strings(std::to_string(mine))) {
    most = std::max<int64_t>(most, std::stoll(text));
  }
  return most;
}

// The reference's bounds of the batch elements in `mask` ([batch] bool) tightened by the
// engine's this iteration (elementwise).
void tighten_reference(std::vector<std::optional<Interval>>& reference, const BoundGraph& g,
                       const CrownEngine& engine, const at::Tensor& mask) {
  for (int i = 1; i < g.size(); ++i) {
    if (!g.is_pre_activation(i)) continue;
    auto& slot = reference[size_t(i)];
    const Interval now = detached(engine.bounds(i));
    const Interval t = tighter(*slot, now);
    std::vector<int64_t> shape(size_t(now.lower.dim()), 1);
    shape[0] = mask.size(0);
    const at::Tensor m = mask.reshape(shape);
    slot = Interval{at::where(m, t.lower, slot->lower), at::where(m, t.upper, slot->upper)};
  }
}

// Whether the next iteration would hold more than the context's limit: what is live now (the
// whole autograd graph, which the next iteration builds again) and, before the first step, the
// two moments Adam will allocate for `unmoved_alpha_bytes` of α.
bool next_iteration_over_limit(const PassContext& context, const collective::CommPtr& in_step,
                               const c10::Device& device, int64_t unmoved_alpha_bytes) {
  return context.memory_limit_bytes > 0 &&
         live_bytes_in_step(device, in_step) + 2 * unmoved_alpha_bytes > context.memory_limit_bytes;
}

}  // namespace

int64_t AlphaSlopes::positions_per_row(int start) const {
  const auto& shape = g_.node(start).shape;  // [1, *]
  if (start == g_.output() || shape.size() != 4) return 1;
  if (size_t(start) >= init_.size() || !init_[size_t(start)]) return 1;
  const Interval& b = *init_[size_t(start)];
  const int64_t unstable = unstable_in_any(b).sum().item<int64_t>();
  return unstable > kSharedAlphaThreshold ? shape[2] * shape[3] : 1;
}

at::Tensor AlphaSlopes::sparse_positions(int start) const {
  if (!sparse_ || sparse_->scheme != IntermediateScheme::kAutoLirpa || start == g_.output() ||
      size_t(start) >= init_.size() || !init_[size_t(start)] || !g_.feeds_splittable(start) ||
      g_.node(start).op->output_shard() != nullptr) {
    return {};
  }
  const Interval& b = *init_[size_t(start)];
  const int64_t n = g_.node_numel(start);
  const at::Tensor unstable = unstable_in_any(b).cpu();  // [n]
  const int64_t k = unstable.sum().item<int64_t>();
  // As CrownEngine::refine: more than minimum_sparsity unstable bounds every neuron.
  if (k == n || double(k) > sparse_->minimum_sparsity * double(n)) return {};
  const at::Tensor rank = unstable.to(at::kLong).cumsum(0) - 1;
  return at::where(unstable, rank, at::full_like(rank, -1));
}

AlphaSlopes::Slopes& AlphaSlopes::prepare(int start, int node, const at::Tensor& rows,
                                          std::span<const Interval* const> in) {
  auto [it, inserted] = alpha_.try_emplace({start, node});
  if (inserted) {
    Slopes& s = it->second;
    s.per_row = positions_per_row(start);
    // This rank's row ids of the start, and the α rows that cover them (a shared convolutional
    // α row covers per_row neurons; a rank owning no id keeps one unused row).
    // A tensor-parallel start's rows are its neurons over every rank (its global width).
    const OutputShard* shard = g_.node(start).op->output_shard();
    const int64_t n = start == g_.output() ? output_rows_
                      : shard != nullptr   ? shard->global
                                           : g_.node_numel(start);
    const RowRange own = owned_rows(n, size_, rank_);
    if (s.per_row == 1) s.position = sparse_positions(start);
    int64_t r = 0;
    if (s.position.defined()) {
      // The unstable neurons among this rank's ids, in id order (none: no row at all).
      const at::Tensor mine = s.position.slice(0, own.begin, own.end);
      const at::Tensor held = mine.masked_select(mine.ge(0));
      s.first = held.numel() > 0 ? held.min().item<int64_t>() : 0;
      r = held.numel();
    } else {
      s.first = own.begin / s.per_row;
      r = std::max<int64_t>(1, (own.end + s.per_row - 1) / s.per_row - s.first);
    }
    const int input = g_.node(node).inputs.front();
    const bool given = size_t(input) < init_.size() && init_[size_t(input)].has_value();
    // [*P]: [B, *shape] or [k, B, *shape] (BoundNode::initial_relaxation_params)
    const at::Tensor init =
        g_.node(node).op->initial_relaxation_params(given ? *init_[size_t(input)] : *in[0]);
    s.shape.assign(init.sizes().begin(), init.sizes().end());
    std::vector<int64_t> full{2, r};
    full.insert(full.end(), s.shape.begin(), s.shape.end());
    if (s.position.defined()) {
      full[1] = 1;
      s.fixed = init.detach().unsqueeze(0).unsqueeze(0).expand(full).clone();
      s.position = s.position.to(rows.device());
      full[1] = r;
    }
    at::Tensor start_values = init.detach();  // [*P], or [B, U] feature-sparse
    const Interval& b = given ? *init_[size_t(input)] : *in[0];
    if (sparse_ && sparse_->scheme != IntermediateScheme::kEvery &&
        g_.node(node).op->traits().splittable && b.lower.sizes() == init.sizes()) {
      const int64_t batch = init.size(0);
      const int64_t f = init.numel() / batch;
      const at::Tensor unstable = unstable_in_any(b);  // [f]
      if (double(unstable.sum().item<int64_t>()) <= sparse_->minimum_sparsity * double(f)) {
        s.features = unstable.nonzero().flatten();  // [U]
        s.base = start_values.reshape({batch, f});
        start_values = s.base.index_select(1, s.features);
        full = {2, r, batch, s.features.size(0)};
      }
    }
    s.alpha = start_values.unsqueeze(0).unsqueeze(0).expand(full).clone().requires_grad_(true);
  }
  Slopes& s = it->second;
  const Interval& bounds_in = *in[0];
  const auto version = [](const at::Tensor& t) { return t.defined() ? t._version() : -1; };
  const std::array versions{version(bounds_in.lower), version(bounds_in.upper)};
  const bool same_bounds =
      s.projected_version >= 0 && s.projected_for.lower.is_same(bounds_in.lower) &&
      s.projected_for.upper.is_same(bounds_in.upper) && s.projected_for_versions == versions;
  if (!same_bounds || s.alpha._version() != s.projected_version) {
    // Projected at use onto what is sound for this pass's input bounds, in place on the leaf
    // (the optimiser continues from the projected value), as auto_LiRPA clips its α. Skipped
    // only where it would change nothing: the same input bounds and α untouched since (the
    // chunks of one start's pass). An in-place change there would invalidate the α that an
    // earlier chunk's step keeps for autograd.
    c10::NoGradGuard no_grad;
    g_.node(node).op->project_relaxation_params(s.alpha, bounds_in);
    if (s.fixed.defined()) g_.node(node).op->project_relaxation_params(s.fixed, bounds_in);
    s.projected_for = bounds_in;
    s.projected_for_versions = versions;
    s.projected_version = s.alpha._version();
  }
  return s;
}

bool AlphaSlopes::optimises(int start) {
  if (limit_bytes_ <= 0 || start == g_.output()) return true;
  const auto [it, inserted] = optimised_.try_emplace(start, true);
  if (inserted) {
    // With Adam's two moments of the α so far (allocated by the first step), within half the
    // limit: the rest is for this start's own pass, the passes still to come in this iteration
    // (the output's among them) and the backward pass.
    it->second = live_bytes_in_step(g_.device(), in_step_) + 2 * bytes() <= limit_bytes_ / 2;
    if (!it->second) ++left_out_;
  }
  return it->second;
}

RelaxParams AlphaSlopes::params(int start, int node, const at::Tensor& rows,
                                std::span<const Interval* const> in) {
  return select(prepare(start, node, rows, in), rows, nullptr);
}

RelaxParams AlphaSlopes::window_params(int start, int node, const at::Tensor& rows,
                                       std::span<const Interval* const> in, const PatchesA& a) {
  const Slopes& s = prepare(start, node, rows, in);
  if (s.shape.size() != 4) {  // P = [B, C, H, W]
    throw Error("internal: patches pass through node '" + g_.node(node).name +
                "', whose relaxation parameters are not one per [C, H, W] element");
  }
  return select(s, rows, &a);
}

RelaxParams AlphaSlopes::select(const Slopes& s, const at::Tensor& rows,
                                const PatchesA* window) const {
  const at::Tensor& a = s.alpha;  // [2, rows, *P], or feature-sparse [2, rows, B, U]
  // The windows' geometry without A's coefficients: the readers below are kept by autograd (a
  // ReLU step reads α inside its recomputed step) and must not hold the pass's A.
  std::optional<PatchesA> geometry;
  if (window != nullptr) {
    const auto [kh, kw] = window->kernel();
    geometry = window->with(at::empty({window->rows(), 0, 0, kh, kw}), {});
  }
  // Rows `index` ([R]) of one side's storage [N, *P]: [R, *P], or read at the pass's windows,
  // [R, B, C, kh, kw].
  const auto pick_full = [geometry](const at::Tensor& storage, const at::Tensor& index) {
    return geometry ? gather_row_windows(storage, index, *geometry)
                    : storage.index_select(0, index);
  };
  // The same from the α storage, feature-sparse ([N, B, U]) or not. Windows need the rows'
  // whole maps, widened before the read (inside the ReLU step: transient); dense reads widen
  // the R rows read.
  const auto pick = [pick_full, features = s.features, base = s.base, shape = s.shape](
                        const at::Tensor& storage, const at::Tensor& index) {
    if (!features.defined()) return pick_full(storage, index);
    return pick_full(widen(storage, features, base, shape), index);
  };
  RelaxParams p;
  if (s.position.defined()) {
    // Rows with an α position here take it; the others (stable under the initial bounds, or
    // another rank's, or a spec-parallel filler) the fixed initial slopes.
    const at::Tensor at_row = s.position.index_select(0, rows) - s.first;  // [rows]
    const at::Tensor held = (at_row >= 0) & (at_row < a.size(1));
    std::vector<int64_t> shape(s.shape.size() + 1, 1);  // [rows, 1, ...]
    shape[0] = rows.numel();
    const at::Tensor keep = held.reshape(shape);
    const at::Tensor first = at::zeros_like(rows);
    // Dense: the fixed [1, *P] broadcasts over the rows; windows: read at each row's window.
    const auto fixed = [&](int k) {
      return window != nullptr ? pick_full(s.fixed[k], first) : s.fixed[k];
    };
    if (a.size(1) == 0) {
      std::vector<int64_t> out{rows.numel()};  // [rows, *P]
      out.insert(out.end(), s.shape.begin(), s.shape.end());
      const auto side = [&](int k) {
        return window != nullptr ? fixed(k) : fixed(k).expand(out).clone();
      };
      p.alpha_l = side(0);
      p.alpha_u = side(1);
      return p;
    }
    const at::Tensor index = at_row.clamp(0, a.size(1) - 1);
    const auto reader = [&](int k) {
      return [pick, index, keep, fixed_k = fixed(k)](const at::Tensor& storage) {
        return at::where(keep, pick(storage, index), fixed_k);
      };
    };
    p.read_l = reader(0);
    p.read_u = reader(1);
  } else {
    at::Tensor idx = s.per_row == 1 ? rows : at::floor_divide(rows, s.per_row);
    if (size_ > 1) {
      // Spec-parallel: ids this rank owns map into its rows. The only others a pass carries are
      // the filler rows that pad a rank's share (CrownEngine::bound_rows), whose bounds are
      // dropped: any sound α serves them.
      idx = (idx - s.first).clamp(0, a.size(1) - 1);
    }
    p.read_l = [pick, idx](const at::Tensor& storage) { return pick(storage, idx); };
    p.read_u = p.read_l;
  }
  // Unread: a ReLU step reads its rows inside its recomputed step (RelaxParams::source_l).
  p.source_l = a[0];
  p.source_u = a[1];
  return p;
}

std::vector<at::Tensor> AlphaSlopes::parameters() const {
  std::vector<at::Tensor> p;
  p.reserve(alpha_.size());
  for (const auto& kv : alpha_) p.push_back(kv.second.alpha);
  return p;
}

at::Tensor AlphaSlopes::get(int start, int node) const {
  const auto it = alpha_.find({start, node});
  return it == alpha_.end() ? at::Tensor() : it->second.alpha;
}

at::Tensor AlphaSlopes::dense(int start, int node) const {
  const auto it = alpha_.find({start, node});
  if (it == alpha_.end()) return {};
  const Slopes& s = it->second;
  if (!s.features.defined()) return s.alpha;
  return widen(s.alpha.flatten(0, 1), s.features, s.base, s.shape)
      .unflatten(0, {2, s.alpha.size(1)});
}

int64_t AlphaSlopes::bytes() const {
  int64_t b = 0;
  for (const auto& kv : alpha_) b += int64_t(kv.second.alpha.nbytes());
  return b;
}

AlphaResult alpha_crown(const AlphaOptions& alpha, const PassContext& context, const BoundGraph& g,
                        const InputBox& box, const at::Tensor& C) {
  const collective::CommPtr& spec_comm = context.spec_comm;
  const collective::CommPtr& in_step = context.in_step ? context.in_step : spec_comm;
  const BoundOptions& options = alpha.bound;
  const bool lower = alpha.sides != BoundSides::kUpper;
  const bool upper = alpha.sides != BoundSides::kLower;
  if (alpha.iterations < 1) throw InvalidArgument("alpha-CROWN needs at least 1 iteration");
  if (!(alpha.lr > 0)) throw InvalidArgument("alpha-CROWN learning rate must be > 0");
  const int64_t spec_rows = C.defined() ? C.size(0) : g.output_numel();
  const int spec_ranks = spec_comm ? spec_comm->size() : 1;
  // auto_LiRPA keeps the best intermediate bounds only from iteration 0 and from the iterations
  // after int(iterations·start_save_best) (0.5) on: in between, the reference stays where it was,
  // so neurons do not turn stable (and lose their gradient) early in the optimisation.
  const int save_after =
      alpha.save_reference_after >= 0 ? alpha.save_reference_after : alpha.iterations / 2;
  c10::AutoGradMode grad_on(true);
  AlphaResult result;
  result.intermediate.resize(size_t(g.size()));
  const auto out_of_time = [&] { return context.optimise_until.expired(); };
  // The reference of the sparse intermediate scheme (auto_LiRPA's aux_reference_bounds, which is
  // its best_intermediate_bounds): decides which neurons get CROWN rows and gives the others their
  // bounds. Shared by the two sides: the lower side's first iteration starts from the upper
  // side's best intermediate bounds, as in auto_LiRPA.
  std::vector<std::optional<Interval>> reference(size_t(g.size()));
  // CROWN's intermediate bounds, from a pass without α like auto_LiRPA's init_alpha: every
  // side's α starts from CROWN's slopes on these, and they decide which α are shared.
  std::vector<std::optional<Interval>> crown_bounds(size_t(g.size()));
  {
    c10::NoGradGuard no_grad;
    CrownEngine engine(g, box, options, context);
    engine.compute_intermediate_bounds();
    for (int i = 1; i < g.size(); ++i) {
      if (g.is_pre_activation(i)) crown_bounds[size_t(i)] = engine.bounds(i);
    }
    if (lower && alpha.proved) {
      // CROWN's own output bounds may meet the goal already (auto_LiRPA's init_alpha bounds the
      // output too, and α,β-CROWN stops there): no α, and none of α's autograd memory.
      const at::Tensor lb = engine.output_bounds(C, true, false).lower;
      if (alpha.proved(lb)) {
        for (int i = 1; i < g.size(); ++i) {
          if (i != g.output()) result.intermediate[size_t(i)] = engine.bounds(i);
        }
        result.bounds.lower = lb;
        if (upper) result.bounds.upper = engine.output_bounds(C, false, true).upper;
        return result;
      }
    }
  }
  // auto_LiRPA optimises the upper bounds first, then the lower bounds, each from fresh α.
  for (const bool lower_side : {false, true}) {
    if (lower_side ? !lower : !upper) continue;
    AlphaSlopes slopes(g, spec_rows, spec_comm ? spec_comm->rank() : 0,
                       spec_comm ? spec_comm->size() : 1);
    slopes.initialise_from(crown_bounds, options);
    slopes.keep_under(context.memory_limit_bytes, in_step);
    RelaxationOptimiser optimiser;
    const size_t slopes_group =
        optimiser.add_group(alpha.lr, RelaxationOptimiser::Projection::kNone);
    at::Tensor best;      // [batch, spec], auto_LiRPA's best: moves on improving iterations only
    at::Tensor tightest;  // [batch, spec], elementwise best over every iteration: the result
    at::Tensor saved;     // [batch]: summed bound of the iteration the reference was last saved at
    int stale = 0;
    for (int it = 0; it < alpha.iterations; ++it) {
      context.checkpoint();  // may throw DeadlineReached
      CrownEngine engine(g, box, options, context);
      engine.set_hook(&slopes);
      for (int i = 1; i < g.size(); ++i) {
        if (reference[size_t(i)] && g.is_pre_activation(i)) {
          engine.set_reference_bounds(i, *reference[size_t(i)]);
        }
      }
      engine.compute_intermediate_bounds();
      const Interval r = engine.output_bounds(C, lower_side, !lower_side);
      const at::Tensor b = lower_side ? r.lower : r.upper;
      const at::Tensor bd = b.detach();
      // Per batch element, larger is better: [batch].
      const at::Tensor score = lower_side ? bd.sum(1) : -bd.sum(1);
      ++result.iterations_run;
      for (int i = 1; i < g.size(); ++i) {  // every iteration's bounds are sound
        if (i == g.output()) continue;
        auto& slot = result.intermediate[size_t(i)];
        const Interval now = detached(engine.bounds(i));
        slot = slot ? tighter(*slot, now) : now;
      }
      // Every iteration's bounds are sound: the result keeps the tightest of each, while `best`
      // (auto_LiRPA's) decides improvement and so the early stop.
      tightest =
          it == 0 ? bd : (lower_side ? at::maximum(tightest, bd) : at::minimum(tightest, bd));
      bool improved = true;
      if (it == 0) {
        best = bd;
        saved = score;
        for (int i = 1; i < g.size(); ++i) {
          if (g.is_pre_activation(i)) reference[size_t(i)] = detached(engine.bounds(i));
        }
      } else {
        // Improved: the summed bound beats the sum of the elementwise best so far. Only the batch
        // elements that improved take this iteration's bounds into their elementwise best, as
        // auto_LiRPA's _update_best_ret: the best it compares against, and so its early stop,
        // moves only then.
        const at::Tensor gained = score > (lower_side ? best.sum(1) : -best.sum(1));  // [batch]
        improved = gained.any().item<bool>();
        best = at::where(gained.unsqueeze(1),
                         lower_side ? at::maximum(best, bd) : at::minimum(best, bd), best);
      }
      stale = improved ? 0 : stale + 1;
      if (it > 0 && (it > save_after || stale == alpha.early_stop_patience)) {
        // Batch elements whose summed bound beats the last saved one tighten their reference.
        const at::Tensor mask = score > saved;  // [batch]
        if (mask.any().item<bool>()) {
          saved = at::where(mask, score, saved);
          tighten_reference(reference, g, engine, mask);
        }
      }
      if (improved && lower_side) {
        result.output_alpha.clear();
        for (int i = 1; i < g.size(); ++i) {
          const at::Tensor a = slopes.dense(g.output(), i);
          if (a.defined()) result.output_alpha[i] = a[0].detach().clone();
        }
      }
      if (stale > alpha.early_stop_patience) break;
      if (lower_side && alpha.proved && alpha.proved(tightest)) break;
      at::Tensor loss = lower_side ? -b.sum() : b.sum();
      // Spec-parallel: every rank holds the whole (gathered) bound and differentiates 1/P of the
      // loss; the gathers' backward sums the ranks' shares (collective/autograd.hpp, partial).
      if (spec_ranks > 1) loss = loss / double(spec_ranks);
      const std::vector<at::Tensor> params = slopes.parameters();
      const bool over_limit =
          next_iteration_over_limit(context, in_step, g.device(), it == 0 ? slopes.bytes() : 0);
      result.memory_limited = result.memory_limited || over_limit;
      if (it + 1 == alpha.iterations || params.empty() || !loss.requires_grad() || out_of_time() ||
          over_limit) {
        break;
      }
      optimiser.set_params(slopes_group, params);
      optimiser.step(loss);
      optimiser.decay(alpha.lr_decay);
    }
    result.alpha_bytes = std::max(result.alpha_bytes, slopes.bytes());
    result.starts_left_out = std::max(result.starts_left_out, slopes.left_out());
    (lower_side ? result.bounds.lower : result.bounds.upper) = tightest;
  }
  return result;
}

}  // namespace distcrown
