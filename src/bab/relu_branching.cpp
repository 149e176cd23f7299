#include "relu_branching.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <ATen/ATen.h>

#include "bab/branching.hpp"
#include "distcrown/util/error.hpp"
#include "relu_domain.hpp"

namespace distcrown::bab::detail {
namespace {

// Relative difference below which FSB's trial values of general splits tie (their last bits
// depend on the batch they were bounded in: 1e-7 relative in float32).
constexpr double kFsbTie = 1e-5;

// The flat index over every split node's neurons (the scores' N_all) as a split of `parent`
// (its below side): a ReLU's at 0, a general node's at its branch point inside the element's
// interval, for domains shaped like `shapes`.
class NeuronIndex {
 public:
  NeuronIndex(const Domain& shapes, const ReluLayout& layout, BranchPoints& points)
      : layout_(layout), points_(points) {
    offsets_.push_back(0);
    for (size_t r = 0; r < layout.size(); ++r) {
      offsets_.push_back(offsets_.back() + shapes.lower[r].numel());
    }
  }
  [[nodiscard]] Split split(int64_t flat, const Domain& parent) const {
    size_t r = 0;
    while (flat >= offsets_[r + 1]) ++r;
    const int64_t j = flat - offsets_[r];
    if (!layout_.general(r)) return relu_split(layout_.relu(r), j, false);
    const at::Tensor& lo = parent.lower[r];
    const std::optional<double> at =
        points_.point(r, lo.view({-1})[j].item<double>(),
                      parent.upper[r].view({-1})[j].item<double>(), lo.scalar_type());
    // A domain is split only on a neuron that scored (general_scores: midpoint inside).
    if (!at) throw Error("internal: a general split without a point inside");
    return Split{layout_.relu(r), j, *at, Split::Side::kBelow, layout_.input(r)};
  }

 private:
  const ReluLayout& layout_;
  BranchPoints& points_;
  std::vector<int64_t> offsets_;
};

}  // namespace

std::vector<Split> choose_splits(const std::vector<Domain>& parents, int64_t batch, int holders,
                                 const BabOptions& options, const ReluLayout& layout,
                                 BranchPoints& points, DomainBounder& bounder) {
  const NeuronIndex index(parents.empty() ? bounder.spare() : parents.front(), layout, points);
  std::vector<Split> picks;
  const bool fsb = options.branching == Branching::kFsb && options.fsb_candidates > 1;
  std::vector<std::vector<int64_t>> cands(parents.size());
  for (size_t p = 0; p < parents.size(); ++p) {
    const at::Tensor& s = parents[p].score;  // [2, N_all]
    cands[p] = fsb ? fsb_candidates(s, options.fsb_candidates)
                   : std::vector<int64_t>{std::max<int64_t>(babsr_choice(s), 0)};
    picks.push_back(index.split(cands[p].empty() ? 0 : cands[p].front(), parents[p]));
  }
  if (!fsb) return picks;
  // FSB: bound both children of every candidate once (no optimisation) and keep, per parent, the
  // candidate whose worse child (with BranchingReduce::kMax, better child) is best.
  std::vector<Domain> trial;
  std::vector<std::pair<size_t, int64_t>> owner;  // (parent, flat)
  for (size_t p = 0; p < parents.size(); ++p) {
    if (cands[p].size() <= 1) continue;
    for (int64_t flat : cands[p]) {
      Split below = index.split(flat, parents[p]);
      Split above = below;
      above.side = Split::Side::kAbove;
      trial.push_back(child(parents[p], layout, below, -1));  // never queued
      trial.push_back(child(parents[p], layout, above, -1));
      owner.emplace_back(p, flat);
    }
  }
  // In pieces no larger than the children of this holder's share of a round, so that FSB's trial
  // (2·k children per parent) never holds more at once than the round's own bounding does; under
  // spec-parallel as many pieces on every rank of the group (bound() pads the short ones).
  const auto piece = size_t(2 * ((batch + holders - 1) / holders));
  auto n_pieces = int64_t((trial.size() + piece - 1) / piece);
  if (bounder.share()) n_pieces = bounder.group_max(n_pieces);
  std::vector<at::Tensor> pieces;
  for (int64_t k = 0; k < n_pieces; ++k) {
    const size_t s = std::min(trial.size(), size_t(k) * piece);
    std::vector<Domain> part(
        std::make_move_iterator(trial.begin() + long(s)),
        std::make_move_iterator(trial.begin() + long(std::min(trial.size(), s + piece))));
    pieces.push_back(bounder.bound(part, 0, false, true).values);
  }
  if (trial.empty()) return picks;
  const auto v = at::cat(pieces).to(at::kDouble).contiguous();
  std::vector<double> reduced(owner.size());
  std::vector<double> best(parents.size(), -std::numeric_limits<double>::infinity());
  for (size_t t = 0; t < owner.size(); ++t) {
    const double inactive = v[int64_t(2 * t)].item<double>();
    const double active = v[int64_t(2 * t + 1)].item<double>();
    reduced[t] = options.branching_reduce == BranchingReduce::kMax ? std::max(inactive, active)
                                                                   : std::min(inactive, active);
    best[owner[t].first] = std::max(best[owner[t].first], reduced[t]);
  }
  // The planned ReLU passes give each domain the same bits in any batch: the first candidate
  // with the best value wins. With general splits the trials run through CrownEngine, whose last
  // bits depend on the piece a child is bounded in (the layout's share of the round): values
  // within kFsbTie of the best tie, and the lowest neuron among them wins, so that every layout
  // makes the same choice.
  const double tie = layout.any_general() ? kFsbTie : 0.0;
  std::vector<int64_t> chosen(parents.size(), -1);
  for (size_t t = 0; t < owner.size(); ++t) {
    const auto [p, flat] = owner[t];
    const double b = best[p];
    const double floor = std::isfinite(b) ? b - tie * std::max(1.0, std::abs(b)) : b;
    if (!(reduced[t] >= floor)) continue;  // NaN never wins
    if (chosen[p] < 0 || (tie > 0 && flat < chosen[p])) chosen[p] = flat;
  }
  for (size_t p = 0; p < parents.size(); ++p) {
    if (chosen[p] >= 0) picks[p] = index.split(chosen[p], parents[p]);
  }
  return picks;
}

}  // namespace distcrown::bab::detail
