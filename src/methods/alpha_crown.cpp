#include "distcrown/methods/alpha_crown.hpp"

#include <limits>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/methods/adam.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"

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

}  // namespace

RelaxParams AlphaSlopes::params(int start, int node, const at::Tensor& rows,
                                std::span<const Interval* const> in) {
  auto [it, inserted] = alpha_.try_emplace({start, node});
  if (inserted) {
    const int64_t r = start == g_.output() ? output_rows_ : g_.node_numel(start);
    const at::Tensor init = g_.node(node).op->initial_slopes(*in[0]);  // [B, *shape]
    std::vector<int64_t> full{2, r};
    full.insert(full.end(), init.sizes().begin(), init.sizes().end());
    it->second = init.detach().unsqueeze(0).unsqueeze(0).expand(full).clone().requires_grad_(true);
  }
  const at::Tensor& a = it->second;  // [2, rows, B, *shape]
  return {a[0].index_select(0, rows), a[1].index_select(0, rows), {}, {}};
}

std::vector<at::Tensor> AlphaSlopes::parameters() const {
  std::vector<at::Tensor> p;
  p.reserve(alpha_.size());
  for (const auto& kv : alpha_) p.push_back(kv.second);
  return p;
}

void AlphaSlopes::project() {
  c10::NoGradGuard no_grad;
  for (auto& kv : alpha_) kv.second.clamp_(0.0, 1.0);
}

at::Tensor AlphaSlopes::get(int start, int node) const {
  const auto it = alpha_.find({start, node});
  return it == alpha_.end() ? at::Tensor() : it->second;
}

int64_t AlphaSlopes::bytes() const {
  int64_t b = 0;
  for (const auto& kv : alpha_) b += int64_t(kv.second.nbytes());
  return b;
}

AlphaResult alpha_crown(const BoundGraph& g, const InputBox& box, const at::Tensor& C,
                        const AlphaOptions& alpha, const BoundOptions& options, bool lower,
                        bool upper) {
  if (alpha.iterations < 1) throw InvalidArgument("alpha-CROWN needs at least 1 iteration");
  if (!(alpha.lr > 0)) throw InvalidArgument("alpha-CROWN learning rate must be > 0");
  const int64_t spec_rows = C.defined() ? C.size(0) : g.output_numel();
  c10::AutoGradMode grad_on(true);
  AlphaResult result;
  result.intermediate.resize(size_t(g.size()));
  const auto out_of_time = [&] {
    return alpha.stop_at && std::chrono::steady_clock::now() >= *alpha.stop_at;
  };
  // auto_LiRPA optimises the upper bounds first, then the lower bounds, each from fresh α.
  for (const bool lower_side : {false, true}) {
    if (lower_side ? !lower : !upper) continue;
    AlphaSlopes slopes(g, spec_rows);
    // This side's best intermediate bounds: the reference of its next iteration. Each side
    // starts from CROWN's, so a lower-only run gives the lower bounds of a two-sided one.
    std::vector<std::optional<Interval>> side_best(size_t(g.size()));
    Adam adam(alpha.lr);
    at::Tensor best;  // [batch, spec]
    double best_loss = std::numeric_limits<double>::infinity();
    int stale = 0;
    for (int it = 0; it < alpha.iterations; ++it) {
      CrownEngine engine(g, box, options);
      engine.set_hook(&slopes);
      // auto_LiRPA: the best intermediate bounds so far are the reference of the sparse scheme.
      for (int i = 1; i < g.size(); ++i) {
        if (it > 0 && side_best[size_t(i)] && g.is_pre_activation(i)) {
          engine.set_reference_bounds(i, *side_best[size_t(i)]);
        }
      }
      engine.compute_intermediate_bounds();
      const Interval r = engine.output_bounds(C, lower_side, !lower_side);
      const at::Tensor b = lower_side ? r.lower : r.upper;
      best = best.defined()
                 ? (lower_side ? at::maximum(best, b.detach()) : at::minimum(best, b.detach()))
                 : b.detach();
      ++result.iterations_run;
      const at::Tensor loss = lower_side ? -b.sum() : b.sum();
      const double loss_value = loss.item<double>();
      // Like auto_LiRPA, the intermediate bounds (the next reference) are tightened by the
      // iterations that improve the loss.
      if (loss_value < best_loss) {
        for (int i = 1; i < g.size(); ++i) {
          if (i == g.output()) continue;
          auto& slot = side_best[size_t(i)];
          const Interval now = detached(engine.bounds(i));
          slot = slot ? tighter(*slot, now) : now;
        }
      }
      if (loss_value < best_loss) {
        best_loss = loss_value;
        stale = 0;
        if (lower_side) {
          result.output_alpha.clear();
          for (int i = 1; i < g.size(); ++i) {
            const at::Tensor a = slopes.get(g.output(), i);
            if (a.defined()) result.output_alpha[i] = a[0].detach().clone();
          }
        }
      } else if (++stale > alpha.early_stop_patience) {
        break;
      }
      const std::vector<at::Tensor> params = slopes.parameters();
      if (it + 1 == alpha.iterations || params.empty() || !loss.requires_grad() || out_of_time()) {
        break;
      }
      loss.backward();
      adam.step(params);
      slopes.project();
      adam.decay(alpha.lr_decay);
    }
    (lower_side ? result.bounds.lower : result.bounds.upper) = best;
    for (size_t i = 0; i < side_best.size(); ++i) {
      auto& slot = result.intermediate[i];
      if (side_best[i]) slot = slot ? tighter(*slot, *side_best[i]) : *side_best[i];
    }
  }
  return result;
}

}  // namespace distcrown
