#pragma once
// What ReLU splitting (relu_bab.cpp) and input splitting (input_bab.cpp) share of a round: the
// queue their domains wait in, and the decision every rank takes from the round's exchanged
// reports (domain.hpp) before bounding anything: the search ends (falsified, timed out, proved,
// or unknown with its reason), or the round's plan. A round:
//   take the worst domains -> report, exchange, tally -> start_round -> take the planned ones
//   -> split, bound, attack (each search its own) -> queue the children not proved.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "distcrown/bab/bab.hpp"
#include "domain.hpp"

namespace distcrown::bab::detail {

/// Domains waiting to be split, worst first (worse_first): a binary heap.
template <class D>
class DomainQueue {
 public:
  void push(D d) {
    heap_.push_back(std::move(d));
    std::push_heap(heap_.begin(), heap_.end(), worse_first);
  }
  /// Up to `n` of the worst domains that `splittable` accepts; those it refuses are dropped,
  /// and `dropped` is then set.
  template <class Splittable>
  std::vector<D> pop_worst(int64_t n, const Splittable& splittable, bool& dropped) {
    std::vector<D> out;
    while (!heap_.empty() && int64_t(out.size()) < n) {
      std::pop_heap(heap_.begin(), heap_.end(), worse_first);
      D d = std::move(heap_.back());
      heap_.pop_back();
      if (splittable(d)) {
        out.push_back(std::move(d));
      } else {
        dropped = true;
      }
    }
    return out;
  }
  [[nodiscard]] size_t size() const { return heap_.size(); }
  [[nodiscard]] const std::vector<D>& items() const { return heap_; }
  /// The heap itself, for take_planned (domain.hpp), which pushes back the candidates left out.
  std::vector<D>& heap() { return heap_; }

 private:
  std::vector<D> heap_;
};

/// While it lives (a search's rounds), counts the world's control messages into `into`.
class ExchangeMeter {
 public:
  ExchangeMeter(const BabWorld& w, collective::CommStats& into)
      : world_(w.world), into_(into), start_(world_ ? world_->stats() : collective::CommStats{}) {}
  ~ExchangeMeter() {
    if (world_) into_ += world_->stats().since(start_);
  }
  ExchangeMeter(const ExchangeMeter&) = delete;
  ExchangeMeter& operator=(const ExchangeMeter&) = delete;

 private:
  collective::CommPtr world_;
  collective::CommStats& into_;
  collective::CommStats start_;
};

/// What the exchange before a round decided.
struct RoundStart {
  std::optional<BabStatus> end;  // the search ends here (res.reason set where unknown)
  std::vector<Planned> plan;     // else the round's domains, worst first
  int64_t batch = 0;             // the round's batch: the smallest cap of every rank
};

/// The decision from the groups' reports and their tally, the same on every rank. Sets
/// res.worst_value and prints the progress before a round that runs, and counts it in
/// res.rounds. `exhausted`: why the search is unknown when a dropped domain was not proved.
RoundStart start_round(const std::vector<RoundReport>& groups, const RoundTally& tally,
                       const BabOptions& options, std::string_view exhausted, Progress& progress,
                       BabResult& res);

}  // namespace distcrown::bab::detail
