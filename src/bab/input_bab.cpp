#include "distcrown/bab/input_bab.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/io/problem.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::bab {
namespace {

struct Box {
  at::Tensor lower, upper;  // [1, *input_shape]
  double value = 0;
  int64_t split_dim = -1;  // where to halve it next (flat input index)
  int64_t id = 0;
};

bool worse_first(const Box& a, const Box& b) {
  return a.value != b.value ? a.value > b.value : a.id > b.id;
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
  at::Tensor input_A;  // [K', B, *input_shape]

 private:
  int output_;
};

}  // namespace

namespace {

BabResult search(const BoundGraph& g, const io::VnnlibCase& c, const Objective& objective,
                 const BabOptions& options, const Deadline& deadline,
                 const BoundOptions& bound_options, Progress& progress, BabResult& res) {
  c10::NoGradGuard no_grad;
  const int64_t K = objective.rhs.size(0);
  const auto done = [&](BabStatus s) {
    res.status = s;
    return res;
  };
  if (K == 0) {
    res.reason = "a disjunct without output constraints holds everywhere";
    return done(BabStatus::kUnknown);
  }
  // Boxes live on the CPU (cheap to split one by one); each batch goes to the device at once.
  const InputBox root = io::enclosing_box(c, g, g.dtype());
  int64_t next_id = 0;

  // Bounds a batch of boxes: sets value and split_dim of each; returns candidate counterexamples
  // (the corner minimising each unproved box's most promising row).
  const auto bound = [&](std::vector<Box>& boxes) {
    const auto B = int64_t(boxes.size());
    const int64_t n = g.input_numel();
    std::vector<at::Tensor> lo;
    std::vector<at::Tensor> hi;
    for (const Box& b : boxes) {
      lo.push_back(b.lower);
      hi.push_back(b.upper);
    }
    const InputBox box{at::cat(lo, 0).to(g.device()), at::cat(hi, 0).to(g.device())};  // [B, *in]
    InputAHook hook(g.output());
    CrownEngine engine(g, box, bound_options);
    engine.set_hook(&hook);
    engine.compute_intermediate_bounds();
    const at::Tensor lb = engine.output_bounds(objective.C, true, false).lower;  // [B, K]
    res.domains_bounded += B;
    const at::Tensor gap = lb.to(at::kDouble) - objective.rhs.to(lb.device());  // [B, K]
    const at::Tensor best_row = gap.argmax(1);                                  // [B]
    const at::Tensor values = gap.amax(1).to(at::kDouble).cpu().contiguous();
    // [K', B, *in] -> [B, K, n]
    const at::Tensor A =
        hook.input_A.reshape({hook.input_A.size(0), B, n}).permute({1, 0, 2}).slice(1, 0, K);
    const at::Tensor radius = ((box.upper - box.lower) / 2).reshape({B, n});
    const at::Tensor centre = ((box.upper + box.lower) / 2).reshape({B, n});
    // Every row counts: a conjunction is proved by whichever row gets above its threshold, and
    // the best row alone can be flat in a dimension the others need split. A tiny width term
    // orders dimensions no row depends on.
    const at::Tensor score = (A.abs().sum(1) + 1e-9) * radius;  // [B, n]
    const at::Tensor dims = score.argmax(1).cpu();              // [B]
    for (int64_t b = 0; b < B; ++b) {
      boxes[size_t(b)].value = values[b].item<double>();
      boxes[size_t(b)].split_dim = dims[b].item<int64_t>();
    }
    // The corner minimising each box's best row.
    const at::Tensor A_best =
        A.gather(1, best_row.reshape({B, 1, 1}).expand({B, 1, n})).squeeze(1);  // [B, n]
    return (centre - A_best.sign() * radius).reshape(box.lower.sizes());
  };

  std::vector<Box> queue;
  {
    std::vector<Box> first{{root.lower, root.upper, 0, -1, next_id++}};
    const at::Tensor corners = bound(first);
    if (auto cex = check_candidates(g, c, corners)) {
      res.counterexample = cex;
      return done(BabStatus::kFalsified);
    }
    if (first.front().value > 0) return done(BabStatus::kProved);
    queue.push_back(first.front());
  }
  bool exhausted = false;
  while (!queue.empty()) {
    res.worst_value = queue.front().value;
    progress.report(res.rounds, res.domains_bounded, int64_t(queue.size()), res.worst_value);
    if (deadline.expired()) return done(BabStatus::kTimeout);
    if (options.max_rounds > 0 && res.rounds >= options.max_rounds) {
      res.reason = "round limit reached";
      return done(BabStatus::kUnknown);
    }
    ++res.rounds;
    std::vector<Box> children;
    while (!queue.empty() && int64_t(children.size()) < 2 * options.batch) {
      std::pop_heap(queue.begin(), queue.end(), worse_first);
      Box p = std::move(queue.back());
      queue.pop_back();
      const int64_t d = p.split_dim;
      const double lo = p.lower.reshape({-1})[d].item<double>();
      const double hi = p.upper.reshape({-1})[d].item<double>();
      // The midpoint as the box's dtype stores it: it must lie strictly inside.
      const double mid = at::scalar_tensor(lo + (hi - lo) / 2, p.lower.options()).item<double>();
      if (!(mid > lo && mid < hi)) {  // no value strictly inside: cannot halve further
        exhausted = true;
        continue;
      }
      Box left{p.lower, p.upper.clone(), 0, -1, next_id++};
      Box right{p.lower.clone(), p.upper, 0, -1, next_id++};
      left.upper.view({-1})[d] = mid;
      right.lower.view({-1})[d] = mid;
      children.push_back(std::move(left));
      children.push_back(std::move(right));
    }
    if (children.empty()) continue;
    const at::Tensor corners = bound(children);
    at::Tensor candidates = corners;
    if (options.attack_every > 0 && res.rounds % options.attack_every == 0) {
      // Also the centres of the worst children, then PGD from the corners of a few of them.
      std::vector<at::Tensor> centres;
      centres.reserve(children.size());
      for (const Box& b : children) centres.push_back((b.lower + b.upper) / 2);
      candidates = at::cat({corners.cpu(), at::cat(centres, 0)}, 0);
    }
    if (auto cex = check_candidates(g, c, candidates)) {
      res.counterexample = cex;
      return done(BabStatus::kFalsified);
    }
    for (Box& b : children) {
      if (b.value > 0) continue;
      queue.push_back(std::move(b));
      std::push_heap(queue.begin(), queue.end(), worse_first);
    }
    res.max_queue = std::max<int64_t>(res.max_queue, int64_t(queue.size()));
  }
  if (exhausted) {
    res.reason = "a box too small to halve was not proved";
    return done(BabStatus::kUnknown);
  }
  return done(BabStatus::kProved);
}

}  // namespace

BabResult input_bab(const BoundGraph& g, const io::VnnlibCase& c, const Objective& objective,
                    const std::vector<Objective>& /*disjuncts*/, const BabOptions& options,
                    const Deadline& deadline, const BoundOptions& bound_options) {
  if (options.batch < 1) throw InvalidArgument("branch and bound batch must be >= 1");
  Progress own_progress(options.progress, deadline);
  Progress& progress = options.reporter != nullptr ? *options.reporter : own_progress;
  progress.start("bab (input splits)");
  // The bounding passes stop at the deadline and print the progress.
  BoundOptions bo = bound_options;
  bo.checkpoint = Checkpoint{deadline, &progress};
  BabResult res;
  try {
    return search(g, c, objective, options, deadline, bo, progress, res);
  } catch (const DeadlineReached&) {
    res.status = BabStatus::kTimeout;
    return res;
  }
}

}  // namespace distcrown::bab
