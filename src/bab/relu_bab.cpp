#include "bab/relu_bab.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <ATen/ATen.h>

#include "cut_pool.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "domain.hpp"
#include "memory_budget.hpp"
#include "relu_bounding.hpp"
#include "relu_branching.hpp"
#include "relu_domain.hpp"
#include "relu_layout.hpp"
#include "round.hpp"
#include "util/tensor_values.hpp"

namespace distcrown::bab {
namespace {

using detail::Bounded;
using detail::Domain;
using detail::Planned;
using detail::RoundReport;

// The bounding passes of a branch and bound do not pad their rows (a pass of one or two rows
// padded to sixteen multiplies its A matrices by 16).
BoundOptions round_bound_options(BoundOptions o) {
  o.align_rows = false;
  return o;
}

InputBox on_device(const InputBox& b, const at::Device& device) {
  return {b.lower.to(device), b.upper.to(device)};
}

// Spec-parallel ReLU splitting (BabOptions::spec_parallel over a group of several ranks): the
// group's ranks, which split every batch; null otherwise.
collective::CommPtr spec_parallel_share(const BabOptions& o, const BabWorld& world,
                                        const BoundGraph& g) {
  if (!o.spec_parallel || !world.group || world.group->size() <= 1) return nullptr;
  if (std::string why = spec_parallel_refusal(o, g.tensor_parallel_group() != nullptr);
      !why.empty()) {
    throw InvalidArgument(why);
  }
  return world.group;
}

// One ReLU-splitting search: the units of src/bab (relu_layout, relu_bounding, relu_branching,
// memory_budget, round) put together, round after round.
class ReluBab {
 public:
  ReluBab(const BabOptions& o, const RunContext& context, const BoundGraph& g,
          const BabProblem& problem, int64_t memory_limit)
      : g_(g),
        problem_(problem),
        o_(o),
        deadline_(context.deadline),
        world_(context.world),
        own_progress_(o.progress, context.deadline, g.device()),
        progress_(context.progress != nullptr ? *context.progress : own_progress_),
        layout_(g),
        points_(g, layout_),
        K_(problem.objective.rhs.size(0)),
        share_(spec_parallel_share(o, context.world, g)),
        // Spec-parallel: each rank keeps the domains it bounded, so the round's plan is made over
        // ranks (one-rank units, which need no communicator of their own).
        units_(share_ ? BabWorld{context.world.world, nullptr, context.world.world_size()}
                      : context.world),
        bounder_(g, layout_, problem.objective, o, round_bound_options(o.bound),
                 Checkpoint{context.deadline, &progress_},
                 on_device(io::enclosing_box(problem.vnnlib_case, g, g.dtype()), g.device()),
                 share_),
        budget_(o, memory_limit, g.device(), units_.groups) {
    if (o.cuts) {
      if (std::string why = cuts_refusal({.shared = world_.groups > 1 || share_ != nullptr,
                                          .tensor_parallel = g.tensor_parallel_group() != nullptr,
                                          .general_splits = layout_.any_general()});
          !why.empty()) {
        throw InvalidArgument(why);
      }
    }
  }

  /// Branch and bound until decided, out of rounds, or past the deadline (kTimeout, also when
  /// a bounding pass stopped at it), starting from `start` (or α-CROWN at the root when null).
  BabResult run(const RootStart* start);
  /// The root with CROWN intermediate bounds (no α optimisation) and `splits` applied.
  Domain crown_root_with(const std::vector<Split>& splits);
  detail::DomainBounder& bounder() { return bounder_; }
  /// The open domains, moved out (RunContext::leftovers).
  std::shared_ptr<void> take_queue() {
    return std::make_shared<detail::DomainQueue<Domain>>(std::move(queue_));
  }

 private:
  /// The rounds; the outcome is in res_.
  void search(const RootStart* start);
  Domain root(const RootStart* start);
  /// Bounds the root; its outcome (a counterexample, nothing to split) goes into `mine`.
  void bound_root(const RootStart* start, RoundReport& mine);
  /// One round's work on its planned parents (plan positions and domains): split, bound,
  /// attack, queue the children not proved.
  void split_and_bound(std::vector<std::pair<int64_t, Domain>>& planned, int64_t first_id,
                       int64_t batch, RoundReport& mine);
  /// Checks the box corners that minimise each open domain's linear lower bounds; with
  /// `pgd_round` (a round number) also runs PGD from them and from fresh random points. With
  /// `shared`, `ds` are this rank's share of its group's domains: the corners of every rank's
  /// are gathered in id order (one process's order), and each rank attacks them all in step.
  std::optional<Counterexample> attack_from(const std::vector<Domain>& ds, const Bounded& b,
                                            std::optional<int64_t> pgd_round, bool shared);
  /// Spec-parallel: the tally's counts per rank (the round's holders) summed per group, and
  /// the rank that found a counterexample as its group.
  void per_group_of_ranks(BabResult& res) const;
  /// Spec-parallel: counts the plan's moves inside a group apart from those between groups.
  void count_moves(const std::vector<Planned>& plan, int64_t moved, BabResult& res) const;
  /// The pool's verdict on each child before it is bounded: pruned children leave `children`,
  /// the others take the splits the pool implies.
  void apply_cuts(std::vector<Domain>& children);
  /// Nogoods from the proved children: each one's decisions with positive β, proved again
  /// from the root in one values-only batch (cut_pool.hpp).
  void learn_cuts(const std::vector<Domain>& children);

  const BoundGraph& g_;
  const BabProblem& problem_;
  const BabOptions& o_;
  const Deadline& deadline_;
  const BabWorld& world_;
  Progress own_progress_;
  Progress& progress_;  // the context's, or own_progress_
  detail::ReluLayout layout_;
  detail::BranchPoints points_;  // where general split nodes' elements are split
  int64_t K_;
  collective::CommPtr share_;  // the group's ranks that split each batch; null: none
  /// Who holds domains in the round exchange: the groups, or under spec-parallel each rank.
  BabWorld units_;
  detail::DomainBounder bounder_;
  detail::BatchBudget budget_;
  BabResult res_;
  detail::DomainQueue<Domain> queue_;    // the open domains, this group's (or rank's) share
  std::optional<Domain> root_;           // the bounded root, where cuts are proved from
  std::optional<detail::CutPool> cuts_;  // with BabOptions::cuts, once the root is bounded
};

void ReluBab::per_group_of_ranks(BabResult& res) const {
  const int size = world_.group_size();
  std::vector<int64_t> per_group(size_t(world_.groups), 0);
  for (size_t r = 0; r < res.domains_per_group.size(); ++r) {
    per_group[r / size_t(size)] += res.domains_per_group[r];
  }
  res.domains_per_group = std::move(per_group);
  if (res.counterexample_group >= 0) res.counterexample_group /= size;
}

void ReluBab::count_moves(const std::vector<Planned>& plan, int64_t moved, BabResult& res) const {
  if (share_) {  // the holders are ranks: the transfers inside a group are counted apart
    const int size = world_.group_size();
    const auto inside = std::count_if(plan.begin(), plan.end(), [&](const Planned& p) {
      return p.holder != p.bounder && p.holder / size == p.bounder / size;
    });
    res.domains_moved_in_groups += inside;
    moved -= inside;
  }
  res.domains_moved += moved;
}

Domain ReluBab::root(const RootStart* start) {
  std::vector<Interval> bounds;
  if (start != nullptr) {
    for (const int pre : layout_.pre_nodes()) {
      if (size_t(pre) >= start->intermediate.size() || !start->intermediate[size_t(pre)]) {
        throw Error("internal: the root start has no bounds for a ReLU input");
      }
      bounds.push_back(*start->intermediate[size_t(pre)]);
    }
    return detail::make_root(g_, layout_, K_, bounds, start->output_alpha);
  }
  AlphaOptions ao;
  ao.iterations = o_.root_iterations;
  ao.lr = o_.root_lr;
  ao.bound = round_bound_options(o_.bound);
  ao.sides = BoundSides::kLower;
  const AlphaResult a = alpha_crown(
      ao, PassContext::within({deadline_, &progress_}).limited_to(budget_.limit(), world_.group),
      g_, bounder_.box(), problem_.objective.C);
  for (const int pre : layout_.pre_nodes()) {
    const auto& b = a.intermediate.at(size_t(pre));
    if (!b) throw Error("internal: no root bounds for a ReLU input");
    bounds.push_back(*b);
  }
  return detail::make_root(g_, layout_, K_, bounds, a.output_alpha);
}

Domain ReluBab::crown_root_with(const std::vector<Split>& splits) {
  CrownEngine engine(g_, bounder_.box(), round_bound_options(o_.bound),
                     PassContext::stopping_at(Checkpoint{deadline_, &progress_}));
  engine.compute_intermediate_bounds();
  std::vector<Interval> bounds;
  for (const int pre : layout_.pre_nodes()) bounds.push_back(engine.bounds(pre));
  Domain d = detail::make_root(g_, layout_, K_, bounds, {});
  int64_t id = 0;
  for (const Split& s : splits) {
    if (std::string why = detail::split_refusal(d, layout_, s); !why.empty()) {
      throw InvalidArgument(why);
    }
    d = detail::child(d, layout_, s, ++id);
  }
  return d;
}

std::optional<Counterexample> ReluBab::attack_from(const std::vector<Domain>& ds, const Bounded& b,
                                                   std::optional<int64_t> pgd_round, bool shared) {
  if (!b.input_A.defined()) return std::nullopt;  // the same on every rank of a group
  // The box corner minimising each domain's lower linear bound of each row, keyed by (id, row).
  const InputBox& box = bounder_.box();
  const auto B = int64_t(ds.size());
  const at::Tensor centre = (box.upper + box.lower) / 2;  // [1, *in]
  const at::Tensor radius = (box.upper - box.lower) / 2;
  std::vector<int64_t> open;
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < B; ++i) {
    if (ds[size_t(i)].value > 0) continue;
    open.push_back(i);
    for (int64_t k = 0; k < K_; ++k) keys.push_back(ds[size_t(i)].id * K_ + k);
  }
  at::Tensor x;  // [n, *in], n = open domains · K, in key order
  if (!open.empty()) {
    const at::Tensor index = at::tensor(open, at::kLong).to(b.input_A.device());
    const at::Tensor A = b.input_A.slice(0, 0, K_).index_select(1, index).transpose(0, 1);
    x = (centre - A.sign() * radius).flatten(0, 1);  // [open, K, *in] -> [n, *in]
  }
  if (shared && share_) {
    // Every rank's corners, padded to the group's largest count (key -1), in key order: the
    // children's ids grow with their parents' plan positions, so this is one process's order.
    const int64_t most = bounder_.group_max(int64_t(keys.size()));
    if (most == 0) return std::nullopt;
    std::vector<int64_t> in_shape(box.lower.sizes().begin(), box.lower.sizes().end());
    in_shape[0] = most;
    at::Tensor mine = at::zeros(in_shape, box.lower.options());
    at::Tensor mine_keys = at::full({most}, int64_t(-1), at::TensorOptions().dtype(at::kLong));
    if (x.defined()) {
      mine.narrow(0, 0, x.size(0)).copy_(x);
      mine_keys.narrow(0, 0, int64_t(keys.size())).copy_(at::tensor(keys, at::kLong));
    }
    mine_keys = mine_keys.to(box.lower.device());
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
  if (auto cex = check_candidates(g_, problem_.vnnlib_case, x)) return cex;
  if (!pgd_round) return std::nullopt;
  // The group's deadline: groups run their rounds' passes apart.
  // Each group attacks its own domains: its share of the round's attack.
  const int groups = world_.groups;
  const int64_t most = round_attack_starts(groups);
  return pgd_attack(round_attack(o_.attack, *pgd_round, world_.group_index(), groups),
                    Checkpoint{deadline_, &progress_}, g_, problem_.vnnlib_case, problem_.disjuncts,
                    x.slice(0, 0, std::min<int64_t>(x.size(0), most)));
}

BabResult ReluBab::run(const RootStart* start) {
  progress_.start("bab (relu splits)");
  try {
    search(start);
  } catch (const DeadlineReached&) {
    // Only from a step that every rank takes together (search catches the rest).
    res_.status = BabStatus::kTimeout;
    res_.domains_bounded = bounder_.bounded();
  }
  res_.planned = bounder_.planned();
  res_.pass_flops = bounder_.pass_flops();
  return res_;
}

void ReluBab::bound_root(const RootStart* start, RoundReport& mine) {
  const int me = units_.group_index();
  try {
    std::vector<Domain> first{root(start)};
    if (share_) bounder_.set_spare(first.front());
    const Bounded b = bounder_.bound(first, o_.iterations, true);
    if (me != 0) bounder_.set_bounded(0);  // the root counts once, as group 0's (rank 0's)
    if (o_.cuts) {
      root_ = first.front();
      cuts_.emplace(layout_, *root_);
    }
    mine.counterexample = attack_from(first, b, std::nullopt, false);
    if (!mine.counterexample && first.front().value <= 0) {
      if (layout_.empty()) {
        mine.no_splittable = true;
      } else if (me == 0) {
        queue_.push(std::move(first.front()));
      }
    }
  } catch (const DeadlineReached&) {
    mine.timed_out = true;
  }
}

void ReluBab::split_and_bound(std::vector<std::pair<int64_t, Domain>>& planned, int64_t first_id,
                              int64_t batch, RoundReport& mine) {
  std::vector<Domain> parents;
  parents.reserve(planned.size());
  for (auto& [p, d] : planned) parents.push_back(std::move(d));
  if (parents.empty() && !share_) return;  // spec-parallel: the group's passes stay in step
  const std::vector<Split> picks =
      detail::choose_splits(parents, batch, units_.groups, o_, layout_, points_, bounder_);
  std::vector<Domain> children;
  for (size_t i = 0; i < parents.size(); ++i) {
    const int64_t id = first_id + 2 * planned[i].first;
    Split below = picks[i];
    below.side = Split::Side::kBelow;
    Split above = picks[i];
    above.side = Split::Side::kAbove;
    children.push_back(detail::child(parents[i], layout_, below, id));
    children.push_back(detail::child(parents[i], layout_, above, id + 1));
  }
  parents.clear();
  if (cuts_) {
    apply_cuts(children);
    if (children.empty()) return;  // every child inside a nogood (cuts: one process, no share)
  }
  const Bounded b = bounder_.bound(children, o_.iterations, true);
  if (cuts_) learn_cuts(children);
  const bool pgd = o_.attack_every > 0 && res_.rounds % o_.attack_every == 0;
  const double attack_start = deadline_.elapsed();
  mine.counterexample =
      attack_from(children, b, pgd ? std::optional<int64_t>(res_.rounds) : std::nullopt, true);
  res_.attack_seconds += deadline_.elapsed() - attack_start;
  for (Domain& c : children) {
    if (c.value <= 0) queue_.push(std::move(c));  // else proved
  }
}

void ReluBab::apply_cuts(std::vector<Domain>& children) {
  std::vector<Domain> kept;
  kept.reserve(children.size());
  for (Domain& c : children) {
    const detail::Propagation p = cuts_->propagate(c);
    if (p.pruned) {
      ++res_.cuts.pruned;
      continue;
    }
    for (const Split& s : p.implied) {
      const double floor = c.floor;
      c = detail::child(c, layout_, s, c.id);
      c.floor = floor;
      ++res_.cuts.implied;
    }
    kept.push_back(std::move(c));
  }
  children = std::move(kept);
}

void ReluBab::learn_cuts(const std::vector<Domain>& children) {
  std::vector<Domain> reduced;
  std::vector<std::vector<detail::Decision>> nogoods;
  for (const Domain& c : children) {
    if (c.value <= 0) continue;
    std::vector<detail::Decision> used = cuts_->decisions(c, true);
    if (used.empty() || used.size() == cuts_->decisions(c).size()) continue;
    reduced.push_back(cuts_->domain_of(*root_, used, c));
    nogoods.push_back(std::move(used));
  }
  if (reduced.empty()) return;
  const int64_t bounded = bounder_.bounded();  // the checks are not domains of the search
  const Bounded b = bounder_.bound(reduced, o_.iterations, true, true);
  bounder_.set_bounded(bounded);
  res_.cuts.checked += int64_t(reduced.size());
  const at::Tensor v = b.values.to(at::kDouble).contiguous();
  for (size_t i = 0; i < nogoods.size(); ++i) {
    if (v[int64_t(i)].item<double>() > 0) {
      cuts_->add(std::move(nogoods[i]));
      ++res_.cuts.learned;
    }
  }
}

void ReluBab::search(const RootStart* start) {
  BabResult& res = res_;
  if (K_ == 0) {
    res.reason = "a disjunct without output constraints holds everywhere";
    res.status = BabStatus::kUnknown;
    return;
  }
  // Every group bounds the root (the same computation everywhere); group 0 queues it. From
  // here on, a rank's own outcomes (a counterexample, a deadline inside a pass, a dropped
  // domain) go into its report and are decided on together at the next round's exchange, so
  // that every rank leaves the loop in the same round with the same result.
  const detail::ExchangeMeter meter(units_, res.exchange);
  RoundReport mine;
  bound_root(start, mine);
  int64_t first_id = 1;           // of the next round's children
  int64_t last_batch = o_.batch;  // the last round's batch (the smallest cap over the ranks)
  const auto splittable = [](const Domain& d) {
    // A domain with every unstable neuron split has nothing left to branch on.
    return d.score.defined() && !(d.score < 0).all().item<bool>();
  };
  for (;;) {
    // This group's worst domains, at most a batch (under this rank's memory cap); all its ranks
    // pop the same ones.
    if (!mine.timed_out) mine.timed_out = deadline_.expired();
    budget_.cap(mine, last_batch, int64_t(queue_.size()));
    std::vector<Domain> candidates;
    if (!mine.timed_out) {
      candidates = queue_.pop_worst(std::min(o_.batch, mine.batch_cap), splittable, mine.exhausted);
    }
    detail::report_candidates(mine, candidates, queue_.size(), bounder_.bounded());
    const std::vector<RoundReport> groups = detail::exchange_reports(units_, mine);
    const detail::RoundTally tally = detail::tally_round(groups, res);
    if (share_) per_group_of_ranks(res);
    const detail::RoundStart round = detail::start_round(
        groups, tally, o_, "a domain with every unstable neuron split was not proved", progress_,
        res);
    if (round.end) {
      res.status = *round.end;
      return;
    }
    res.min_batch = res.min_batch == 0 ? round.batch : std::min(res.min_batch, round.batch);
    res.memory_limited = res.memory_limited || round.batch < o_.batch;
    last_batch = round.batch;
    int64_t moved = 0;  // every transfer between the plan's holders
    std::vector<std::pair<int64_t, Domain>> planned = detail::take_planned(
        units_, round.plan, candidates, queue_.heap(),
        [&](std::string_view bytes) { return detail::decode_domain(bytes, g_.device()); }, moved);
    count_moves(round.plan, moved, res);
    budget_.begin_round(planned.size());
    try {
      split_and_bound(planned, first_id, round.batch, mine);
    } catch (const DeadlineReached&) {
      mine.timed_out = true;
    }
    budget_.end_round(planned.size());
    first_id += 2 * int64_t(round.plan.size());
    res.max_queue = std::max<int64_t>(res.max_queue, int64_t(queue_.size()));
    if (o_.measure_store) {
      const DomainStoreBytes now = detail::store_bytes(queue_.items(), layout_.size());
      if (now.total() > res.peak_store.total()) res.peak_store = now;
    }
  }
}

}  // namespace

at::Tensor split_domain_lower_bound(const BabOptions& options, const BoundGraph& g,
                                    const InputBox& box, const at::Tensor& C,
                                    const std::vector<Split>& splits) {
  io::VnnlibCase c;
  c.input_lower = to_doubles(box.lower);
  c.input_upper = to_doubles(box.upper);
  const Objective obj{C.to(g.dtype()), at::zeros({C.size(0)}, at::kDouble), {}, {}};
  const std::vector<Objective> none;
  const BabProblem problem{c, obj, none};
  const RunContext context;
  ReluBab bab(options, context, g, problem, 0);
  std::vector<Domain> ds{bab.crown_root_with(splits)};
  return bab.bounder().bound(ds, options.iterations, options.iterations > 0).lower;
}

BabResult relu_bab(const BabOptions& options, const RunContext& context, const BoundGraph& g,
                   const BabProblem& problem, const RootStart* start) {
  if (options.batch < 1) throw InvalidArgument("branch and bound batch must be >= 1");
  BabOptions o = options;
  o.batch = round_batch(options, context.world);
  ReluBab bab(o, context, g, problem, detail::memory_limit(context.memory_limit_bytes, g.device()));
  BabResult r = bab.run(start);
  if (r.status == BabStatus::kTimeout && context.leftovers != nullptr) {
    context.leftovers->keep(bab.take_queue());
  }
  return r;
}

}  // namespace distcrown::bab
