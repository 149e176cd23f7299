#include "bab/input_bab.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/io/problem.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "domain.hpp"
#include "methods/planned_chain.hpp"
#include "round.hpp"

namespace distcrown::bab {
namespace {

using detail::RoundReport;
using detail::SubBox;

// Stands for the value of a box whose clipped region is empty (no counterexample in it).
constexpr double kProvedByClipping = std::numeric_limits<double>::infinity();

// x [B, n] in double rounded to `dtype`, never inward: direction -1 rounds down, +1 up.
at::Tensor round_outward(const at::Tensor& x, at::ScalarType dtype, int direction) {
  const at::Tensor r = x.to(dtype);
  const double away = direction < 0 ? -INFINITY : INFINITY;
  const at::Tensor moved_in = direction < 0 ? r.to(at::kDouble) > x : r.to(at::kDouble) < x;
  return at::where(moved_in, at::nextafter(r, at::full_like(r, away)), r);
}

// A tensor's values, flat, in double (exact for float32 and float64).
std::vector<double> values_of(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
  return {d.const_data_ptr<double>(), d.const_data_ptr<double>() + d.numel()};
}

// Records the A at the input of passes from the output; default (CROWN) relaxations.
class InputAHook final : public RelaxationHook {
 public:
  explicit InputAHook(int output) : output_(output) {}
  RelaxParams params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                     std::span<const Interval* const> /*in*/) override {
    return {};
  }
  void observe(int start, int node, const BoundA& a) override {
    if (start == output_ && node == 0) input_A = a.lA;
  }
  [[nodiscard]] bool reads_rows() const override { return false; }
  at::Tensor input_A;  // [K', B, *input_shape]

 private:
  int output_;
};

}  // namespace

ClippedBoxes clip_to_violations(const at::Tensor& lower, const at::Tensor& upper,
                                const at::Tensor& A, const at::Tensor& linear_gap, int passes) {
  // Shapes: lower/upper [B, n], A [B, K, n], linear_gap [B, K]; all double.
  at::Tensor l = lower;
  at::Tensor u = upper;
  at::Tensor gap = linear_gap;  // min over the current box of A_k·x + c_k
  const at::Tensor absA = A.abs();
  // Slack for the float32 rounding of the bound: ~170 ulps of the largest term in the sum.
  const at::Tensor slack =
      1e-5 * (gap.abs() + at::matmul(absA, at::maximum(l.abs(), u.abs()).unsqueeze(2)).squeeze(2));
  for (int pass = 0; pass < passes; ++pass) {
    const at::Tensor centre = ((l + u) / 2).unsqueeze(1);  // [B, 1, n]
    const at::Tensor radius = ((u - l) / 2).unsqueeze(1);
    const at::Tensor own = A * centre - absA * radius;  // dim i's part of the minimum [B, K, n]
    // A_ki·x_i <= slack_k - (the minimum of the other dims' terms and c_k)
    const at::Tensor limit = (slack - gap).unsqueeze(2) + own;  // [B, K, n]
    const at::Tensor bound = limit / A;
    const at::Tensor new_u = at::where(A > 0, bound, INFINITY).amin(1);  // [B, n]
    const at::Tensor new_l = at::where(A < 0, bound, -INFINITY).amax(1);
    const at::Tensor next_l = at::maximum(l, new_l);
    const at::Tensor next_u = at::minimum(u, new_u);
    // Shrinking dimension i leaves the rows' minima over the other dims as they were; the new
    // minimum of each row is the old one plus the change of its own terms.
    const at::Tensor next_own = A * ((next_l + next_u) / 2).unsqueeze(1) -
                                absA * ((next_u - next_l) / 2).clamp_min(0).unsqueeze(1);
    gap = gap + (next_own - own).sum(2);
    l = next_l;
    u = next_u;
  }
  const at::Tensor empty = (l > u).any(1) | (gap > slack).any(1);
  return {at::where(empty.unsqueeze(1), lower, l), at::where(empty.unsqueeze(1), upper, u), empty};
}

at::Tensor input_split_scores(const at::Tensor& A, const at::Tensor& radius, const at::Tensor& gap,
                              const at::Tensor& root_radius) {
  // Shapes: A [B, K, n], radius [B, n], gap [B, K], root_radius [n]. Every row counts: a
  // conjunction is proved by whichever row gets above its threshold, and the best row alone can
  // be flat in a dimension the others need split. A tiny width term orders dimensions no row
  // depends on.
  const at::Tensor spread = (A.abs() * radius.unsqueeze(1)).sum(2);  // [B, K]
  const auto [value, best] = gap.max(1);                             // [B]
  const at::Tensor deficit =
      (-value - spread.gather(1, best.unsqueeze(1)).squeeze(1)).clamp_min(0).unsqueeze(1);
  const at::Tensor unexplored =
      at::where(root_radius > 0, radius / root_radius.clamp_min(1e-300), at::zeros_like(radius));
  return (A.abs().sum(1) + 1e-9) * radius + kDeficitShare * deficit * unexplored;
}

namespace {

// The boxes' vectors `field` (each `width` long) as the rows of one tensor: [B, width], double.
template <class Field>
at::Tensor stacked(const std::vector<SubBox>& boxes, int64_t width, Field field) {
  at::Tensor t = at::empty({int64_t(boxes.size()), width}, at::kDouble);
  double* p = t.data_ptr<double>();
  for (const SubBox& b : boxes) {
    const std::vector<double>& v = field(b);
    std::copy(v.begin(), v.end(), p);
    p += width;
  }
  return t;
}
const std::vector<double>& lower_of(const SubBox& b) { return b.lower; }
const std::vector<double>& upper_of(const SubBox& b) { return b.upper; }
const std::vector<double>& A_of(const SubBox& b) { return b.A; }
const std::vector<double>& c_of(const SubBox& b) { return b.c; }

// v = row b of t ([B, width], double, contiguous).
void assign_row(std::vector<double>& v, const at::Tensor& t, int64_t b) {
  const int64_t width = t.size(1);
  const double* p = t.const_data_ptr<double>() + b * width;
  v.assign(p, p + width);
}

// x [B, *] in double rounded outward to `dtype`: its values again in double, contiguous.
at::Tensor outward_values(const at::Tensor& x, at::ScalarType dtype, int direction) {
  return round_outward(x, dtype, direction).to(at::kDouble).contiguous();
}

// Clips boxes with their stored linear bounds (SubBox::A, c); drops those left empty.
std::vector<SubBox> clip_halves(std::vector<SubBox> boxes, at::ScalarType dtype) {
  if (boxes.empty() || boxes.front().A.empty()) return boxes;
  const auto B = int64_t(boxes.size());
  const auto n = int64_t(boxes.front().lower.size());
  const auto K = int64_t(boxes.front().c.size());
  const at::Tensor l = stacked(boxes, n, lower_of);  // [B, n]
  const at::Tensor u = stacked(boxes, n, upper_of);
  const at::Tensor A = stacked(boxes, K * n, A_of).reshape({B, K, n});
  const at::Tensor gap =
      stacked(boxes, K, c_of) +
      (A * ((l + u) / 2).unsqueeze(1) - A.abs() * ((u - l) / 2).unsqueeze(1)).sum(2);  // [B, K]
  const ClippedBoxes clipped = clip_to_violations(l, u, A, gap);
  const at::Tensor lo_r = outward_values(clipped.lower, dtype, -1);
  const at::Tensor hi_r = outward_values(clipped.upper, dtype, +1);
  const at::Tensor empty = clipped.empty.contiguous();
  const bool* is_empty = empty.const_data_ptr<bool>();
  std::vector<SubBox> out;
  out.reserve(boxes.size());
  for (int64_t b = 0; b < B; ++b) {
    if (is_empty[b]) continue;
    SubBox& box = boxes[size_t(b)];
    assign_row(box.lower, lo_r, b);
    assign_row(box.upper, hi_r, b);
    out.push_back(std::move(box));
  }
  return out;
}

// Where to halve a box along its split dimension: the midpoint as `dtype` (the graph's) stores
// it, when it lies strictly inside; none when no value does (the box cannot be halved).
std::optional<double> halving_point(const SubBox& b, at::ScalarType dtype) {
  const double lo = b.lower[size_t(b.split_dim)];
  const double hi = b.upper[size_t(b.split_dim)];
  double mid = lo + (hi - lo) / 2;
  if (dtype == at::kFloat) {
    mid = double(float(mid));
  } else if (dtype != at::kDouble) {
    mid = at::scalar_tensor(mid, at::TensorOptions().dtype(dtype)).item<double>();
  }
  if (!(mid > lo && mid < hi)) return std::nullopt;
  return mid;
}

// Bounds a batch of boxes (each [1, *in], on the CPU): sets value, split_dim, the linear bounds
// and the clipped box of each; returns candidate counterexamples (the corner minimising each
// box's most promising row), [B, *in]. The passes run in `passes` (they stop at its checkpoint):
// the plan's where there is one (methods/planned_chain.hpp), else CrownEngine's.
at::Tensor bound_boxes(const BoundGraph& g, const Objective& objective,
                       const BoundOptions& bound_options, const PassContext& passes,
                       PlannedChain* plan, const at::Tensor& root_radius,
                       std::vector<SubBox>& boxes) {
  const int64_t K = objective.rhs.size(0);
  const auto B = int64_t(boxes.size());
  const int64_t n = g.input_numel();
  std::vector<int64_t> shape = g.input_shape();
  shape.front() = B;
  const at::Tensor lower = stacked(boxes, n, lower_of);  // [B, n], double
  const at::Tensor upper = stacked(boxes, n, upper_of);
  const InputBox box{lower.to(g.dtype()).reshape(shape).to(g.device()),
                     upper.to(g.dtype()).reshape(shape).to(g.device())};  // [B, *in]
  at::Tensor crown_lb;                                                    // [B, K]
  at::Tensor lb;  // crown_lb, intersected with IBP's under the tight schemes
  at::Tensor A;   // [B, K, n]: crown_lb's linear bound's coefficients at the input
  if (plan != nullptr) {
    const ChainBounds cb = plan->bound(box, passes.checkpoint);
    crown_lb = cb.crown_lower;
    lb = at::maximum(crown_lb, cb.ibp_lower);  // the plan computes kTightUnstable only
    A = cb.input_A;
  } else {
    InputAHook hook(g.output());
    CrownEngine engine(g, box, bound_options, passes);
    engine.set_hook(&hook);
    engine.compute_intermediate_bounds();
    // One CROWN pass from the spec rows: the clipping below needs its linear bound itself, the
    // value is that bound intersected with IBP's under the tight schemes (output_bounds() would
    // run the pass a second time to intersect).
    const int64_t m = g.output_numel();
    std::vector<int64_t> rows_shape{K, B};
    rows_shape.insert(rows_shape.end(), g.output_shape().begin() + 1, g.output_shape().end());
    const at::Tensor C_rows = objective.C.to(box.lower.options())
                                  .reshape({K, 1, m})
                                  .expand({K, B, m})
                                  .reshape(rows_shape);
    crown_lb = engine.backward_from(g.output(), BoundA{C_rows, {}}).lower;
    lb = crown_lb;
    if (intersects_ibp(bound_options.scheme)) {  // as output_bounds() would, without its pass
      lb = at::maximum(lb, engine.output_ibp(objective.C).lower);
    }
    // [K', B, *in] -> [B, K, n]
    A = hook.input_A.reshape({hook.input_A.size(0), B, n}).permute({1, 0, 2}).slice(1, 0, K);
  }
  const at::Tensor rhs = objective.rhs.to(at::kDouble).to(lb.device());
  const at::Tensor gap = lb.to(at::kDouble) - rhs;                           // [B, K]
  const at::Tensor values = gap.amax(1).cpu().contiguous();                  // [B]
  const at::Tensor Ad = A.to(at::kDouble).cpu().contiguous();                // [B, K, n]
  const at::Tensor linear_gap = crown_lb.to(at::kDouble).cpu() - rhs.cpu();  // [B, K]
  // Only a counterexample's region matters: shrink each box to it (abcrown's input clipping).
  const ClippedBoxes clipped = clip_to_violations(lower, upper, Ad, linear_gap);
  const at::Tensor radius = (clipped.upper - clipped.lower) / 2;  // [B, n]
  const at::Tensor centre = (clipped.upper + clipped.lower) / 2;
  const at::Tensor dims =
      input_split_scores(Ad, radius, gap.cpu(), root_radius).argmax(1).contiguous();
  const at::Tensor lo_r = outward_values(clipped.lower, g.dtype(), -1);
  const at::Tensor hi_r = outward_values(clipped.upper, g.dtype(), +1);
  const at::Tensor empty = clipped.empty.contiguous();
  // c = the linear bound's constant: its minimum over the (unclipped) box less the A terms.
  const at::Tensor offset = (linear_gap - (Ad * ((lower + upper) / 2).unsqueeze(1) -
                                           Ad.abs() * ((upper - lower) / 2).unsqueeze(1))
                                              .sum(2))
                                .contiguous();  // [B, K]
  const double* v = values.const_data_ptr<double>();
  const int64_t* d = dims.const_data_ptr<int64_t>();
  const bool* is_empty = empty.const_data_ptr<bool>();
  const at::Tensor A_rows = Ad.reshape({B, K * n});
  for (int64_t b = 0; b < B; ++b) {
    SubBox& box_b = boxes[size_t(b)];
    assign_row(box_b.A, A_rows, b);
    assign_row(box_b.c, offset, b);
    // An empty clipped box holds no counterexample: proved, whatever the value says.
    box_b.value = is_empty[b] ? std::max(v[b], kProvedByClipping) : v[b];
    box_b.split_dim = d[b];
    if (!is_empty[b]) {
      assign_row(box_b.lower, lo_r, b);
      assign_row(box_b.upper, hi_r, b);
    }
  }
  // The corner minimising each box's best row (of the clipped box).
  const at::Tensor best_row = gap.argmax(1).cpu();  // [B]
  const at::Tensor A_best =
      Ad.gather(1, best_row.reshape({B, 1, 1}).expand({B, 1, n})).squeeze(1);  // [B, n]
  return (centre - A_best.sign() * radius).reshape(box.lower.sizes());
}

// One input-splitting search: its domains are sub-boxes; a round halves the worst ones along
// their split dimension, clips the halves with the parent's linear bounds, and bounds them.
class InputBab {
 public:
  InputBab(const BabOptions& o, const RunContext& context, const BoundGraph& g,
           const BabProblem& problem, const BoundOptions& bound_options, Progress& progress)
      : o_(o),
        passes_(PassContext::stopping_at(Checkpoint{context.deadline, &progress})),
        deadline_(context.deadline),
        world_(context.world),
        g_(g),
        problem_(problem),
        bo_(bound_options),
        progress_(progress) {
    if (o.passes == PassPath::kPlanned && problem.objective.rhs.size(0) > 0) {
      std::string unplanned;  // why CrownEngine's passes run instead
      plan_ = PlannedChain::plan(g, problem.objective.C, bound_options, unplanned);
    }
  }

  /// Branch and bound until decided, out of rounds, or past the deadline.
  BabResult run() {
    try {
      search();
    } catch (const DeadlineReached&) {
      res_.status = BabStatus::kTimeout;
    }
    res_.planned = plan_ != nullptr;
    res_.pass_flops = plan_ != nullptr ? plan_->flops() : 0;
    return res_;
  }
  /// The open boxes, moved out (RunContext::leftovers).
  std::shared_ptr<void> take_queue() {
    return std::make_shared<detail::DomainQueue<SubBox>>(std::move(queue_));
  }

 private:
  /// The rounds; the outcome is in res_.
  void search();
  /// Bounds the whole box; its outcome goes into `mine`, and group 0 queues it when open.
  void bound_root(RoundReport& mine);
  /// One round's work on its planned parents: halve, clip, bound, check candidates, queue the
  /// open halves.
  void split_and_bound(std::vector<std::pair<int64_t, SubBox>>& planned, int64_t first_id,
                       RoundReport& mine);

  const BabOptions& o_;
  PassContext passes_;  // the bounding passes stop at the deadline and print the progress
  const Deadline& deadline_;
  const BabWorld& world_;
  const BoundGraph& g_;
  const BabProblem& problem_;
  const BoundOptions& bo_;
  Progress& progress_;
  std::unique_ptr<PlannedChain> plan_;  // null: CrownEngine's passes
  at::Tensor root_radius_;              // [n], double: the root box's (input_split_scores)
  detail::DomainQueue<SubBox> queue_;
  int64_t bounded_ = 0;  // by this group
  BabResult res_;
};

void InputBab::bound_root(RoundReport& mine) {
  try {
    // Boxes live on the CPU (cheap to split one by one); each batch goes to the device at once.
    const InputBox root = io::enclosing_box(problem_.vnnlib_case, g_, g_.dtype());
    root_radius_ = ((root.upper.to(at::kDouble) - root.lower.to(at::kDouble)) / 2).reshape({-1});
    std::vector<SubBox> first(1);
    first.front().lower = values_of(root.lower);
    first.front().upper = values_of(root.upper);
    const at::Tensor corners =
        bound_boxes(g_, problem_.objective, bo_, passes_, plan_.get(), root_radius_, first);
    const bool leader = world_.group_index() == 0;
    bounded_ = leader ? 1 : 0;  // the root counts once, as group 0's
    mine.counterexample = check_candidates(g_, problem_.vnnlib_case, corners);
    if (!mine.counterexample && first.front().value <= 0 && leader) {
      queue_.push(std::move(first.front()));
    }
  } catch (const DeadlineReached&) {
    mine.timed_out = true;
  }
}

void InputBab::split_and_bound(std::vector<std::pair<int64_t, SubBox>>& planned, int64_t first_id,
                               RoundReport& mine) {
  std::vector<SubBox> children;
  for (auto& [position, p] : planned) {
    const int64_t d = p.split_dim;
    const double mid = *halving_point(p, g_.dtype());
    const int64_t id = first_id + 2 * position;
    SubBox left{p.lower, p.upper, 0, -1, id, p.A, p.c};
    SubBox right{p.lower, p.upper, 0, -1, id + 1, p.A, p.c};
    left.upper[size_t(d)] = mid;
    right.lower[size_t(d)] = mid;
    children.push_back(std::move(left));
    children.push_back(std::move(right));
  }
  // The parent's linear bounds hold on each half: clip the halves with them before bounding
  // (a half often holds a smaller slice of the region, or none: proved without a pass).
  children = clip_halves(std::move(children), g_.dtype());
  if (children.empty()) return;
  const at::Tensor corners =
      bound_boxes(g_, problem_.objective, bo_, passes_, plan_.get(), root_radius_, children);
  bounded_ += int64_t(children.size());
  const double attack_start = deadline_.elapsed();
  at::Tensor candidate_points = corners;
  if (o_.attack_every > 0 && res_.rounds % o_.attack_every == 0) {
    // Also the centres of the children, in the graph's dtype.
    const auto width = int64_t(children.front().lower.size());
    const at::Tensor centres = ((stacked(children, width, lower_of).to(g_.dtype()) +
                                 stacked(children, width, upper_of).to(g_.dtype())) /
                                2)
                                   .reshape(corners.sizes());
    candidate_points = at::cat({corners.cpu(), centres}, 0);
  }
  mine.counterexample = check_candidates(g_, problem_.vnnlib_case, candidate_points);
  res_.attack_seconds += deadline_.elapsed() - attack_start;
  for (SubBox& b : children) {
    if (b.value <= 0) queue_.push(std::move(b));
  }
}

void InputBab::search() {
  c10::NoGradGuard no_grad;
  BabResult& res = res_;
  if (problem_.objective.rhs.size(0) == 0) {
    res.reason = "a disjunct without output constraints holds everywhere";
    res.status = BabStatus::kUnknown;
    return;
  }
  // Every group bounds the root (the same computation everywhere); group 0 queues it. From here
  // on the groups bound their own shares of each round: a rank's own outcomes (a counterexample,
  // a deadline inside a pass, a box too small to halve) go into its report and are decided on
  // together at the next round's exchange, as in ReLU branch and bound (relu_bab.cpp).
  const detail::ExchangeMeter meter(world_, res.exchange);
  RoundReport mine;
  bound_root(mine);
  int64_t first_id = 1;  // of the next round's halves
  // A box with no value strictly inside its split dimension cannot be halved: dropped unproved.
  const auto splittable = [dtype = g_.dtype()](const SubBox& b) {
    return halving_point(b, dtype).has_value();
  };
  for (;;) {
    // This group's worst boxes, at most a batch; every rank of the group pops the same ones.
    if (!mine.timed_out) mine.timed_out = deadline_.expired();
    std::vector<SubBox> candidates;
    if (!mine.timed_out) candidates = queue_.pop_worst(o_.batch, splittable, mine.exhausted);
    detail::report_candidates(mine, candidates, queue_.size(), bounded_);
    const std::vector<RoundReport> groups = detail::exchange_reports(world_, mine);
    const detail::RoundTally tally = detail::tally_round(groups, res);
    const detail::RoundStart round = detail::start_round(
        groups, tally, o_, "a box too small to halve was not proved", progress_, res);
    if (round.end) {
      res.status = *round.end;
      return;
    }
    std::vector<std::pair<int64_t, SubBox>> planned = detail::take_planned(
        world_, round.plan, candidates, queue_.heap(),
        [](std::string_view bytes) { return detail::decode_box(bytes); }, res.domains_moved);
    try {
      split_and_bound(planned, first_id, mine);
    } catch (const DeadlineReached&) {
      mine.timed_out = true;
    }
    first_id += 2 * int64_t(round.plan.size());
    res.max_queue = std::max<int64_t>(res.max_queue, int64_t(queue_.size()));
  }
}

}  // namespace

BabResult input_bab(const BabOptions& options, const RunContext& context, const BoundGraph& g,
                    const BabProblem& problem) {
  if (options.batch < 1) throw InvalidArgument("branch and bound batch must be >= 1");
  if (options.cuts) throw InvalidArgument(cuts_refusal({.splits_inputs = true}));
  Progress own_progress(options.progress, context.deadline);
  Progress& progress = context.progress != nullptr ? *context.progress : own_progress;
  progress.start("bab (input splits)");
  BoundOptions bo = options.bound;
  // Rows need not be padded to kRowAlign here: no result compares a box's bits across row
  // layouts (a box's bits already depend on the batch it is bounded in), and a pass's rows are
  // few (the spec's, or each box's unstable neurons), so padding cost ~15 % of the boxes a
  // second on ACAS Xu (docs/archive/results-2026.md).
  bo.align_rows = false;
  BabOptions o = options;
  o.batch = round_batch(options, context.world);
  InputBab bab(o, context, g, problem, bo, progress);
  BabResult r = bab.run();
  if (r.status == BabStatus::kTimeout && context.leftovers != nullptr) {
    context.leftovers->keep(bab.take_queue());
  }
  return r;
}

}  // namespace distcrown::bab
