#pragma once
// Falsification: projected gradient descent (PGD) on the property's violation margin, and the
// concrete check every counterexample passes before "sat" is reported.
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/objective.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/deadline.hpp"

namespace distcrown::bab {

struct Counterexample {
  std::vector<double> x;  // the input, X_0..X_{n-1}
  std::vector<double> y;  // the network's output at x (concrete forward pass), Y_0..Y_{m-1}
};

/// Checks candidate inputs x [N, *input_shape]: each is clamped into the case's box as written
/// (double) and stored in the graph's dtype without leaving it, run through the network (concrete
/// forward), and returned when its output satisfies some disjunct of the case — every constraint
/// as written in the file, evaluated in double. The one check behind "sat".
std::optional<Counterexample> check_candidates(const BoundGraph& g, const io::VnnlibCase& c,
                                               const at::Tensor& x);

struct AttackOptions {
  int restarts = 64;  // random starting points (plus the box centre), attacked in one batch
  int steps = 100;
  double step_fraction = 0.1;  // initial step as a fraction of each input's box width
  uint64_t seed = 0;
  /// Points of the box sampled by forward passes before PGD (half uniform, half vertices): any
  /// counterexample among them is returned, and PGD starts from those closest to one instead of
  /// uniform random points: `restarts` of them, or more on a small network (as many as 2^26
  /// activation elements of PGD's passes allow, at most 1024). -1: as many samples as 2^24
  /// activation elements allow (at least `restarts`, at most 16384); 0: none.
  int64_t samples = -1;
};

/// The attack of a ReLU-splitting round (every attack_every rounds): from the worst domains'
/// candidate points (pgd_attack's `starts`) and a few fresh random points, seeded by `round` so
/// that every run and every rank of a group draws the same ones, at most 30 steps. With `groups`
/// domain groups attacking their own domains in the same round, group `group`'s share: ⌈1/groups⌉
/// of the random points, seeded apart from the other groups' (one group: all of them, seeded by
/// `round` alone).
AttackOptions round_attack(const AttackOptions& root, int64_t round, int group = 0, int groups = 1);

/// The most candidate points of its worst domains a group starts a round's attack from (64 in
/// all, shared out as round_attack shares the random points).
int64_t round_attack_starts(int groups);

/// PGD over the case's box minimising, for each disjunct, its margin (then the best), from
/// `options.samples` sampled points' best; the result has passed check_candidates. `starts` ([M,
/// *input_shape], optional) are extra starting points (e.g. where bounds are worst). A start whose
/// gradient is 0 everywhere (Sign layers: PGD has no direction) takes random sign steps instead,
/// each kept only where it did not raise the start's margin. Every step beats `until`'s heartbeat
/// (verify's progress line: a step of a large network takes seconds); once its deadline has expired
/// the attack gives up (checked between steps; no DeadlineReached).
std::optional<Counterexample> pgd_attack(const AttackOptions& options, const Checkpoint& until,
                                         const BoundGraph& g, const io::VnnlibCase& c,
                                         const std::vector<Objective>& disjuncts,
                                         const at::Tensor& starts = at::Tensor());

}  // namespace distcrown::bab
