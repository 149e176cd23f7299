#include "distcrown/bab/verifier.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/bab/input_bab.hpp"
#include "distcrown/bab/relu_bab.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/util/enum_names.hpp"

namespace distcrown::bab {

std::string to_string(Verdict v) { return std::string(enum_name(v)); }

namespace {

std::vector<Objective> objectives_of(const io::VnnlibCase& c, int64_t n_out, at::ScalarType dtype) {
  std::vector<Objective> o;
  for (const auto& d : c.disjuncts) o.push_back(make_objective(d, n_out, dtype));
  return o;
}

// The phases of verify (attack, α-CROWN at the root, branch and bound); `finish` sets r's
// verdict. DeadlineReached from any bounding pass propagates to verify(). Across ranks every rank
// runs every phase: the attack and the root α-CROWN the same computation everywhere (in step:
// `deadline` is agreed over the world), branch and bound (ReLU or input splits) its group's own
// share of each round (its passes agree on `group_deadline`, its rounds over the world).
template <class Finish>
VerifyResult decide(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options, const Deadline& deadline,
                    const Deadline& group_deadline, Progress& progress, VerifyResult& r,
                    const Finish& finish) {
  const int64_t n_out = g.output_numel();
  std::vector<std::vector<Objective>> objectives;
  for (const auto& c : property.cases) objectives.push_back(objectives_of(c, n_out, g.dtype()));

  // 1. Attack every box.
  VerifyOptions o = options;
  o.bab.attack.deadline = deadline;
  o.bab.attack.heartbeat = &progress;
  o.bab.reporter = &progress;
  // Every bounding pass stops at the deadline and prints the progress from inside.
  o.bound.checkpoint = Checkpoint{deadline, &progress};
  progress.start("attack");
  for (size_t i = 0; i < property.cases.size(); ++i) {
    if (auto cex = pgd_attack(g, property.cases[i], objectives[i], o.bab.attack)) {
      r.counterexample = cex;
      return finish(Verdict::kSat, "PGD attack");
    }
    if (deadline.expired()) return finish(Verdict::kTimeout, "timeout during the attack");
  }

  const bool input_split = splits_inputs(options, g);
  bool unknown = false;
  std::string unknown_reason;
  int64_t rounds = 0;
  bool crown_proved = true;  // every root proved by CROWN's bounds, without α steps
  for (size_t i = 0; i < property.cases.size(); ++i) {
    const io::VnnlibCase& c = property.cases[i];
    const std::vector<Objective>& objs = objectives[i];
    // 2. α-CROWN on every disjunct at once (ReLU splitting); input splitting starts from CROWN
    // on the whole box inside input_bab.
    std::vector<bool> proved(objs.size(), false);
    std::vector<RootStart> starts(objs.size());
    if (!input_split) {
      std::vector<at::Tensor> C;
      std::vector<at::Tensor> rhs;
      for (const Objective& o : objs) {
        C.push_back(o.C);
        rhs.push_back(o.rhs);
      }
      const InputBox cpu_box = io::enclosing_box(c, g, g.dtype());
      const InputBox box{cpu_box.lower.to(g.device()), cpu_box.upper.to(g.device())};
      progress.start("root CROWN + alpha-CROWN");
      AlphaOptions ao;
      ao.iterations = options.bab.root_iterations;
      ao.lr = options.bab.root_lr;
      ao.deadline = deadline;
      // Disjunct d (its rows [row, row + k) of the bounds [1, K]) is proved when one of its rows
      // is: its constraints cannot all hold.
      const auto proves = [&](const at::Tensor& lb, size_t d, int64_t row) {
        const int64_t k = objs[d].rhs.size(0);
        return k > 0 && (lb.slice(1, row, row + k).to(at::kDouble).cpu() - objs[d].rhs)
                            .amax(1)
                            .gt(0)
                            .all()
                            .item<bool>();
      };
      // No more α steps once every disjunct is proved (CROWN's first pass often does it).
      ao.proved = [&](const at::Tensor& lb) {
        if (!at::isfinite(lb).all().item<bool>()) return false;
        int64_t row = 0;
        for (size_t d = 0; d < objs.size(); ++d) {
          if (!proves(lb, d, row)) return false;
          row += objs[d].rhs.size(0);
        }
        return true;
      };
      const AlphaResult root = alpha_crown(g, box, at::cat(C, 0), ao, o.bound, true, false);
      crown_proved = crown_proved && root.iterations_run == 0;
      const at::Tensor& lb = root.bounds.lower;
      require_finite({lb, at::Tensor()});  // an answer must never rest on NaN bounds
      int64_t row = 0;
      for (size_t d = 0; d < objs.size(); ++d) {
        const int64_t k = objs[d].rhs.size(0);
        proved[d] = proves(lb, d, row);
        // Branch and bound on this disjunct starts from this run: its intermediate bounds and
        // its rows of the output α (β-CROWN's start; no second α-CROWN per disjunct).
        RootStart& s = starts[d];
        s.intermediate = root.intermediate;
        for (const auto& [node, a] : root.output_alpha) {
          s.output_alpha[node] = a.slice(0, row, row + k).clone();
        }
        row += k;
      }
    }
    // 3. Branch and bound on the open disjuncts: ReLU splitting over all of them at once
    // (joined) or one search per disjunct.
    std::vector<Objective> search_obj;
    std::vector<RootStart> search_start;
    std::vector<size_t> open;
    for (size_t d = 0; d < objs.size(); ++d) {
      if (!proved[d]) open.push_back(d);
    }
    if (!input_split && options.bab.disjuncts == DisjunctSearch::kJoined && open.size() > 1) {
      std::vector<Objective> joined;
      RootStart s;
      s.intermediate = starts[open.front()].intermediate;
      std::map<int, std::vector<at::Tensor>> alpha_rows;
      for (const size_t d : open) {
        joined.push_back(objs[d]);
        for (const auto& [node, a] : starts[d].output_alpha) alpha_rows[node].push_back(a);
      }
      for (auto& [node, rows] : alpha_rows) s.output_alpha[node] = at::cat(rows, 0);
      search_obj.push_back(join_disjuncts(joined));
      search_start.push_back(std::move(s));
    } else {
      for (const size_t d : open) {
        search_obj.push_back(objs[d]);
        search_start.push_back(std::move(starts[d]));
      }
    }
    for (size_t d = 0; d < search_obj.size(); ++d) {
      if (deadline.expired())
        return finish(Verdict::kTimeout, "timeout before every disjunct was proved");
      BabResult b;
      const double bab_start = deadline.elapsed();
      // Each group bounds its own share of a round: its passes agree on the group's deadline,
      // the rounds over the world.
      BabOptions bo = o.bab;
      bo.attack.deadline = group_deadline;
      BoundOptions bound = o.bound;
      bound.checkpoint.deadline = group_deadline;
      if (input_split) {
        b = input_bab(g, c, search_obj[d], objs, bo, group_deadline, bound);
      } else {
        b = relu_bab(g, c, search_obj[d], objs, bo, group_deadline, bound, nullptr,
                     &search_start[d]);
      }
      r.bab_seconds += deadline.elapsed() - bab_start;
      r.domains_bounded += b.domains_bounded;
      r.domains_moved += b.domains_moved;
      r.domains_moved_in_groups += b.domains_moved_in_groups;
      if (b.min_batch > 0) {
        r.bab_min_batch =
            r.bab_min_batch == 0 ? b.min_batch : std::min(r.bab_min_batch, b.min_batch);
      }
      r.memory_limited = r.memory_limited || b.memory_limited;
      if (b.status != BabStatus::kProved && b.rounds > 0) r.worst_bound = b.worst_value;
      r.domains_per_group.resize(b.domains_per_group.size(), 0);
      for (size_t k = 0; k < b.domains_per_group.size(); ++k) {
        r.domains_per_group[k] += b.domains_per_group[k];
      }
      rounds += b.rounds;
      switch (b.status) {
        case BabStatus::kProved:
          break;
        case BabStatus::kFalsified:
          r.counterexample = b.counterexample;
          if (b.counterexample_group >= 0) r.counterexample_group = b.counterexample_group;
          return finish(Verdict::kSat, "counterexample found in branch and bound");
        case BabStatus::kTimeout:
          if (b.rounds == 0) {
            return finish(Verdict::kTimeout, "timeout in branch and bound, at its root");
          }
          return finish(Verdict::kTimeout, "timeout in branch and bound (worst bound " +
                                               std::to_string(b.worst_value) + ")");
        case BabStatus::kUnknown:
          unknown = true;
          unknown_reason = b.reason;
          break;
      }
    }
  }
  if (unknown) return finish(Verdict::kUnknown, unknown_reason);
  if (!input_split && r.domains_bounded == 0) {
    return finish(Verdict::kUnsat, crown_proved ? "CROWN at the root" : "alpha-CROWN at the root");
  }
  return finish(Verdict::kUnsat, std::string(input_split ? "input" : "relu") +
                                     " branch and bound, " + std::to_string(rounds) + " rounds");
}

}  // namespace

bool splits_inputs(const VerifyOptions& options, const BoundGraph& g) {
  return options.split == SplitMode::kInput ||
         (options.split == SplitMode::kAuto && g.input_numel() <= options.input_split_max_inputs);
}

VerifyResult verify(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options) {
  return verify(g, property, options, Deadline(options.timeout_s));
}

VerifyResult verify(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options, const Deadline& local_deadline) {
  c10::NoGradGuard no_grad;
  const BabWorld& world = options.bab.world;
  if (world.world_size() % world.groups != 0) {
    throw InvalidArgument("--domain-groups " + std::to_string(world.groups) +
                          " does not divide the " + std::to_string(world.world_size()) + " ranks");
  }
  const Deadline deadline = local_deadline.agreed_by(collective::expiry_agreement(world.world));
  const Deadline group_deadline =
      local_deadline.agreed_by(collective::expiry_agreement(world.group));
  // Rank 0 prints the progress lines.
  Progress progress(options.bab.progress && world.world_rank() == 0, deadline, g.device());
  VerifyResult r;
  const auto finish = [&](Verdict v, std::string detail) {
    // An answer decided after the deadline is a timeout (VNN-COMP counts late answers so).
    if ((v == Verdict::kSat || v == Verdict::kUnsat) && deadline.expired()) {
      detail = to_string(v) + " decided after the deadline (" + detail + ")";
      v = Verdict::kTimeout;
      r.counterexample.reset();
    }
    r.verdict = v;
    r.detail = std::move(detail);
    r.seconds = deadline.elapsed();
    return r;
  };
  try {
    decide(g, property, options, deadline, group_deadline, progress, r, finish);
  } catch (const DeadlineReached&) {
    finish(Verdict::kTimeout, "timeout during " + progress.phase());
  }
  if (world.world_size() > 1) {
    // Every decision was collective; a disagreement here is a bug, and no answer is better
    // than a wrong one.
    for (const std::string& v : world.world->all_gather_strings(to_string(r.verdict))) {
      if (v != to_string(r.verdict)) {
        throw Error("internal: ranks reached different verdicts (" + v + " and " +
                    to_string(r.verdict) + ")");
      }
    }
  }
  return r;
}

std::string format_result(const VerifyResult& r) {
  std::ostringstream out;
  out << to_string(r.verdict) << "\n";
  if (r.verdict == Verdict::kSat && r.counterexample) {
    char buf[64];
    const auto& x = r.counterexample->x;
    const auto& y = r.counterexample->y;
    out << "(";
    for (size_t i = 0; i < x.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.17g", x[i]);
      out << (i == 0 ? "(" : " (") << "X_" << i << " " << buf << ")\n";
    }
    for (size_t j = 0; j < y.size(); ++j) {
      std::snprintf(buf, sizeof buf, "%.17g", y[j]);
      out << " (Y_" << j << " " << buf << ")" << (j + 1 == y.size() ? ")" : "") << "\n";
    }
  }
  return out.str();
}

}  // namespace distcrown::bab
