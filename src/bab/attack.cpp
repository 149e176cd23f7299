#include "distcrown/bab/attack.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/util/error.hpp"
#include "util/tensor_values.hpp"

namespace distcrown::bab {
namespace {

// The case's box as [1, *input_shape] tensors of the graph's dtype.
std::pair<at::Tensor, at::Tensor> box_tensors(const BoundGraph& g, const io::VnnlibCase& c) {
  const auto opts = at::TensorOptions().dtype(g.dtype()).device(g.device());
  return {at::tensor(c.input_lower, at::kDouble).to(opts).reshape(g.input_shape()),
          at::tensor(c.input_upper, at::kDouble).to(opts).reshape(g.input_shape())};
}

// The soft margin of each output row y [N, m]: per disjunct the sum of its rows' positive
// violations (all must reach <= 0), the smallest over the disjuncts; [N]. Undefined when no
// disjunct has a row.
at::Tensor soft_margin(const at::Tensor& y, const std::vector<Objective>& disjuncts) {
  std::vector<at::Tensor> m;
  for (const Objective& d : disjuncts) {
    if (d.rhs.numel() == 0) continue;
    m.push_back(
        (at::matmul(y, d.C.to(y.options()).t()) - d.rhs.to(y.options())).clamp_min(0).sum(1));
  }
  if (m.empty()) return {};
  return std::get<0>(at::stack(m, 1).min(1));
}

// Points of the box [lo, hi] ([1, *input_shape]): the first half uniform, the rest vertices
// (each coordinate at one end at random); [n, *input_shape].
at::Tensor sample_box(const at::Tensor& lo, const at::Tensor& hi, int64_t n, at::Generator& gen) {
  std::vector<int64_t> shape(lo.sizes().begin(), lo.sizes().end());
  shape[0] = n;
  const auto dbl = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor u = at::rand(shape, gen, dbl).to(lo.options());
  const at::Tensor coin = (at::rand(shape, gen, dbl) < 0.5).to(lo.device());
  const int64_t half = n / 2;
  const at::Tensor uniform = lo + u.slice(0, 0, half) * (hi - lo);
  const at::Tensor vertices = at::where(coin.slice(0, half), hi, lo);
  return at::cat({uniform, vertices}, 0);
}

struct Sampled {
  std::optional<Counterexample> counterexample;
  at::Tensor best;  // [k, *input_shape], the k samples of smallest soft margin
};

// Forward passes only, in chunks: `n` sampled points of the case's box, a counterexample among
// them (checked in double), or the `k` closest to one as PGD's starts.
Sampled best_samples(const BoundGraph& g, const io::VnnlibCase& c,
                     const std::vector<Objective>& disjuncts, const at::Tensor& lo,
                     const at::Tensor& hi, int64_t n, int64_t k, at::Generator& gen,
                     const Checkpoint& until) {
  c10::NoGradGuard no_grad;
  constexpr int64_t kChunkElements = int64_t{1} << 22;
  const int64_t chunk = std::clamp<int64_t>(kChunkElements / g.activation_numel(), 2, n);
  at::Tensor best;
  at::Tensor best_margin;
  for (int64_t done = 0; done < n && !until.deadline.expired(); done += chunk) {
    const at::Tensor x = sample_box(lo, hi, std::min(chunk, n - done), gen);
    const at::Tensor margin = soft_margin(g.forward(x).reshape({x.size(0), -1}), disjuncts);
    if (!margin.defined()) return {};
    const at::Tensor held = (margin <= 0).nonzero().reshape({-1});
    if (held.numel() > 0) {
      if (auto cex = check_candidates(g, c, x.index_select(0, held))) return {cex, {}};
    }
    best = best.defined() ? at::cat({best, x}, 0) : x;
    best_margin = best_margin.defined() ? at::cat({best_margin, margin}, 0) : margin;
    const int64_t keep = std::min<int64_t>(k, best.size(0));
    const at::Tensor order = std::get<1>(at::topk(best_margin, keep, 0, /*largest=*/false));
    best = best.index_select(0, order);
    best_margin = best_margin.index_select(0, order);
  }
  return {std::nullopt, best};
}

}  // namespace

std::optional<Counterexample> check_candidates(const BoundGraph& g, const io::VnnlibCase& c,
                                               const at::Tensor& x) {
  if (!x.defined() || x.numel() == 0) return std::nullopt;
  c10::NoGradGuard no_grad;
  const int64_t N = x.size(0);
  const at::Tensor lo = at::tensor(c.input_lower, at::kDouble);  // [n], as written
  const at::Tensor hi = at::tensor(c.input_upper, at::kDouble);
  const at::Tensor xd =
      at::maximum(at::minimum(x.detach().cpu().to(at::kDouble).reshape({N, -1}), hi), lo);
  // Rounding to the graph's dtype may step outside the box: step back inside then.
  at::Tensor xs = xd.to(g.dtype());
  xs = at::where(xs.to(at::kDouble) > hi, at::nextafter(xs, at::full_like(xs, -1e30)), xs);
  xs = at::where(xs.to(at::kDouble) < lo, at::nextafter(xs, at::full_like(xs, 1e30)), xs);
  const at::Tensor inside = ((xs.to(at::kDouble) >= lo) & (xs.to(at::kDouble) <= hi)).all(1);
  // Where no point of the dtype lies inside (fixed inputs lower = upper that float32 cannot
  // represent), the candidate is the point in double, exactly in the box, run forward in double.
  if (!inside.all().item<bool>()) xs = at::where(inside.unsqueeze(1), xs.to(at::kDouble), xd);
  std::vector<int64_t> shape(g.input_shape().begin(), g.input_shape().end());
  shape[0] = N;
  const at::Tensor y = g.forward(xs.reshape(shape).to(g.device())).reshape({N, -1});
  for (const auto& d : c.disjuncts) {
    const Objective exact = make_objective(d, y.size(1), at::kDouble);
    const at::Tensor ok = margins(exact, y).cpu() <= 0;  // [N], every row inside the box now
    if (ok.any().item<bool>()) {
      const int64_t i = ok.nonzero().reshape({-1})[0].item<int64_t>();
      return Counterexample{to_doubles(xs[i]), to_doubles(y[i])};
    }
  }
  return std::nullopt;
}

AttackOptions round_attack(const AttackOptions& root, int64_t round, int group, int groups) {
  if (groups < 1 || group < 0 || group >= groups) throw InvalidArgument("attack: group index");
  AttackOptions a = root;
  // At most 16 random starts (a quarter of the root attack's default): it runs every few rounds,
  // in every group (a group's attack costs the same whatever its share of the round's domains).
  a.restarts = (std::min(root.restarts, 16) + groups - 1) / groups;
  a.seed = root.seed + uint64_t(round) + uint64_t(group) * 0x9E3779B97F4A7C15ULL;
  a.steps = std::min(root.steps, 30);
  a.samples = 0;  // its starts are the worst domains' points
  return a;
}

int64_t round_attack_starts(int groups) {
  if (groups < 1) throw InvalidArgument("attack: group count");
  return (64 + groups - 1) / groups;
}

std::optional<Counterexample> pgd_attack(const AttackOptions& options, const Checkpoint& until,
                                         const BoundGraph& g, const io::VnnlibCase& c,
                                         const std::vector<Objective>& disjuncts,
                                         const at::Tensor& starts) {
  if (options.restarts < 0 || options.steps < 0) throw InvalidArgument("attack: negative count");
  const auto [lo, hi] = box_tensors(g, c);
  const at::Tensor width = hi - lo;  // [1, *input_shape]
  at::Generator gen = at::detail::createCPUGenerator(options.seed);
  // Starting points: the centre, the sampled points closest to a counterexample (or uniform
  // random points), and the given ones. [N, *input_shape]
  std::vector<at::Tensor> parts{(lo + hi) / 2};
  if (options.samples != 0 && options.restarts > 0) {
    // Budgets in activation elements: 2^24 for the samples' forward passes, 2^26 for PGD's
    // forward and backward passes (three a step), so that a small network (ACAS Xu: 16,384
    // samples, several hundred starts) is searched far wider than a large one (at least
    // `restarts` starts).
    constexpr int64_t kSampleElements = int64_t{1} << 24;
    constexpr int64_t kPgdElements = int64_t{1} << 26;
    const int64_t elements = g.activation_numel();
    const int64_t n = options.samples > 0 ? options.samples
                                          : std::clamp<int64_t>(kSampleElements / elements,
                                                                options.restarts, 16384);
    const int64_t starts_kept =
        std::clamp<int64_t>(kPgdElements / (int64_t{3} * std::max(options.steps, 1) * elements),
                            options.restarts, 1024);
    Sampled s = best_samples(g, c, disjuncts, lo, hi, n, starts_kept, gen, until);
    if (s.counterexample) return s.counterexample;
    if (s.best.defined()) parts.push_back(s.best);
  } else if (options.restarts > 0) {
    std::vector<int64_t> rshape(g.input_shape().begin(), g.input_shape().end());
    rshape[0] = options.restarts;
    const at::Tensor u = at::rand(rshape, gen, at::TensorOptions().dtype(at::kDouble));
    parts.push_back(lo + u.to(lo.options()) * width);
  }
  if (starts.defined() && starts.numel() > 0) parts.push_back(starts.detach().to(lo.options()));
  at::Tensor x = at::cat(parts, 0);
  if (auto cex = check_candidates(g, c, x)) return cex;
  if (options.steps == 0 || disjuncts.empty()) return std::nullopt;
  // Through step functions the gradient is a surrogate's (BoundGraph::forward_surrogate), which
  // may mislead: each start then runs twice, once following it (a step that did not lower the
  // margin followed by a random one) and once as the random search below alone.
  const bool surrogate = g.has_surrogate_gradients();
  if (surrogate) x = at::cat({x, x}, 0);
  const int64_t N = x.size(0);
  at::Tensor walker;  // [N]: the starts that only search at random
  if (surrogate) walker = at::arange(N, at::TensorOptions().device(x.device())) >= N / 2;
  const auto row_shape = [&](const at::Tensor& v) {  // [N] -> [N, 1, ..] against x
    std::vector<int64_t> s(size_t(x.dim()), 1);
    s[0] = N;
    return v.reshape(s);
  };
  // A start whose gradient is 0 everywhere cannot move by PGD: it takes a random sign step
  // instead, kept only where it did not raise the start's soft margin (a (1+1) random search).
  at::Tensor prev_x;
  at::Tensor prev_margin;  // [N]
  // Each start attacks the disjunct closest to holding there.
  for (int step = 0; step < options.steps; ++step) {
    if (until.heartbeat != nullptr) until.heartbeat->beat();
    if (until.deadline.expired()) break;
    at::Tensor xv = x.detach().requires_grad_(true);
    at::Tensor margin;  // [N]
    {
      c10::AutoGradMode grad_on(true);
      // Through step functions as through the identity (their own gradient is 0).
      margin = soft_margin(g.forward_surrogate(xv).reshape({N, -1}), disjuncts);
      if (!margin.defined()) return std::nullopt;
      margin.sum().backward();
    }
    const double frac = options.step_fraction * (1.0 - double(step) / options.steps);
    {
      c10::NoGradGuard no_grad;
      at::Tensor dir = xv.grad().sign();
      margin = margin.detach();
      at::Tensor stuck = (dir == 0).reshape({N, -1}).all(1);  // [N]
      if (surrogate) {
        stuck = stuck | walker;
        if (prev_margin.defined()) stuck = stuck | (margin >= prev_margin);
      }
      if (stuck.any().item<bool>()) {
        if (prev_x.defined()) {
          const at::Tensor worse = stuck & (margin > prev_margin);
          x = at::where(row_shape(worse), prev_x, x);
          margin = at::where(worse, prev_margin, margin);
        }
        const at::Tensor coin =
            (at::rand(x.sizes(), gen, x.options().device(at::kCPU)) < 0.5).to(x.device());
        dir = at::where(row_shape(stuck), at::where(coin, 1.0, -1.0).to(x.scalar_type()), dir);
      }
      prev_x = x;
      prev_margin = margin;
      x = x - frac * width * dir;
      x = at::maximum(at::minimum(x, hi), lo);
    }
    if ((step + 1) % 10 == 0 || step + 1 == options.steps) {
      if (auto cex = check_candidates(g, c, x)) return cex;
    }
  }
  return std::nullopt;
}

}  // namespace distcrown::bab
