#include "distcrown/bab/verifier.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "bab/case_screen.hpp"
#include "bab/input_bab.hpp"
#include "bab/memory_budget.hpp"
#include "bab/relu_bab.hpp"
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

// What verify() has decided so far, and how to end it: `finish` sets the verdict (an answer
// reached after the deadline is a timeout) and returns the result.
struct Decision {
  VerifyResult& r;
  std::function<VerifyResult(Verdict, std::string)> finish;
};

// The root of one case: α-CROWN on every disjunct at once (ReLU splitting; input splitting starts
// from CROWN on the whole box inside input_bab). Per disjunct: proved, and where its branch and
// bound starts (the run's intermediate bounds and its rows of the output α).
struct CaseRoot {
  /// `disjuncts` open, starting from nothing (input splitting's start).
  explicit CaseRoot(size_t disjuncts) : proved(disjuncts, false), starts(disjuncts) {}
  std::vector<bool> proved;
  std::vector<RootStart> starts;
  bool crown_proved = true;     // proved by CROWN's bounds, without α steps
  bool memory_limited = false;  // α-CROWN stopped optimising at the memory limit
};

CaseRoot bound_case_root(const BoundGraph& g, const io::VnnlibCase& c,
                         const std::vector<Objective>& objs, const VerifyOptions& options,
                         const Deadline& deadline, const PassContext& limit, Progress& progress) {
  CaseRoot root(objs.size());
  std::vector<at::Tensor> C;
  for (const Objective& o : objs) C.push_back(o.C);
  const InputBox cpu_box = io::enclosing_box(c, g, g.dtype());
  const InputBox box{cpu_box.lower.to(g.device()), cpu_box.upper.to(g.device())};
  progress.start("root CROWN + alpha-CROWN");
  AlphaOptions ao;
  ao.iterations = options.bab.root_iterations;
  ao.lr = options.bab.root_lr;
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
  ao.bound = options.bab.bound;
  ao.sides = BoundSides::kLower;
  const AlphaResult a = alpha_crown(ao,
                                    PassContext::within({deadline, &progress})
                                        .limited_to(limit.memory_limit_bytes, limit.in_step),
                                    g, box, at::cat(C, 0));
  root.memory_limited = a.memory_limited;
  root.crown_proved = a.iterations_run == 0;
  const at::Tensor& lb = a.bounds.lower;
  require_finite({lb, at::Tensor()});  // an answer must never rest on NaN bounds
  int64_t row = 0;
  for (size_t d = 0; d < objs.size(); ++d) {
    const int64_t k = objs[d].rhs.size(0);
    root.proved[d] = proves(lb, d, row);
    RootStart& s = root.starts[d];
    s.intermediate = a.intermediate;
    for (const auto& [node, alpha] : a.output_alpha) {
      s.output_alpha[node] = alpha.slice(0, row, row + k).clone();
    }
    row += k;
  }
  return root;
}

// The searches of a case's open disjuncts: ReLU splitting over all of them at once (joined) or
// one search per disjunct, each with where it starts.
struct Searches {
  std::vector<Objective> objectives;
  std::vector<RootStart> starts;
};

Searches plan_searches(const std::vector<Objective>& objs, CaseRoot& root, bool input_split,
                       DisjunctSearch mode) {
  Searches s;
  std::vector<size_t> open;
  for (size_t d = 0; d < objs.size(); ++d) {
    if (!root.proved[d]) open.push_back(d);
  }
  if (!input_split && mode == DisjunctSearch::kJoined && open.size() > 1) {
    std::vector<Objective> joined;
    RootStart start;
    start.intermediate = root.starts[open.front()].intermediate;
    std::map<int, std::vector<at::Tensor>> alpha_rows;
    for (const size_t d : open) {
      joined.push_back(objs[d]);
      for (const auto& [node, a] : root.starts[d].output_alpha) alpha_rows[node].push_back(a);
    }
    for (auto& [node, rows] : alpha_rows) start.output_alpha[node] = at::cat(rows, 0);
    s.objectives.push_back(join_disjuncts(joined));
    s.starts.push_back(std::move(start));
  } else {
    for (const size_t d : open) {
      s.objectives.push_back(objs[d]);
      s.starts.push_back(std::move(root.starts[d]));
    }
  }
  return s;
}

// Adds one branch and bound's counts to the result.
void add_search(VerifyResult& r, const BabResult& b) {
  r.domains_bounded += b.domains_bounded;
  r.domains_moved += b.domains_moved;
  r.domains_moved_in_groups += b.domains_moved_in_groups;
  if (b.min_batch > 0) {
    r.bab_min_batch = r.bab_min_batch == 0 ? b.min_batch : std::min(r.bab_min_batch, b.min_batch);
  }
  r.memory_limited = r.memory_limited || b.memory_limited;
  r.bab_planned = b.planned && (r.bab_planned || r.bab_searches == 0);
  ++r.bab_searches;
  r.bab_rounds += b.rounds;
  r.bab_pass_flops += b.pass_flops;
  r.cuts += b.cuts;
  r.exchange += b.exchange;
  r.bab_attack_seconds += b.attack_seconds;
  if (b.status != BabStatus::kProved && b.rounds > 0) r.worst_bound = b.worst_value;
  r.domains_per_group.resize(b.domains_per_group.size(), 0);
  for (size_t k = 0; k < b.domains_per_group.size(); ++k) {
    r.domains_per_group[k] += b.domains_per_group[k];
  }
}

// The verdict a branch and bound that did not prove its objective gives (none when it proved).
std::optional<std::pair<Verdict, std::string>> search_verdict(const BabResult& b) {
  switch (b.status) {
    case BabStatus::kProved:
      return std::nullopt;
    case BabStatus::kFalsified:
      return std::pair{Verdict::kSat, std::string("counterexample found in branch and bound")};
    case BabStatus::kTimeout:
      if (b.rounds == 0) {
        return std::pair{Verdict::kTimeout,
                         std::string("timeout in branch and bound, at its root")};
      }
      return std::pair{Verdict::kTimeout, "timeout in branch and bound (worst bound " +
                                              std::to_string(b.worst_value) + ")"};
    case BabStatus::kUnknown:
      return std::pair{Verdict::kUnknown, b.reason};
  }
  return std::nullopt;
}

// The phases of verify (attack, α-CROWN at the root, branch and bound). DeadlineReached from any
// bounding pass propagates to verify(). Across ranks every rank runs every phase: the attack and
// the root α-CROWN the same computation everywhere (in step: `deadline` is agreed over the
// world), branch and bound (ReLU or input splits) its group's own share of each round (its
// passes agree on `group.deadline`, its rounds over the world).
VerifyResult decide(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options, const Deadline& deadline, const RunContext& group,
                    Decision& decision) {
  VerifyResult& r = decision.r;
  Progress& progress = *group.progress;
  const int64_t n_out = g.output_numel();
  std::vector<std::vector<Objective>> objectives;
  for (const auto& c : property.cases) objectives.push_back(objectives_of(c, n_out, g.dtype()));

  // The root α-CROWN runs on every rank in step (FSDP gathers inside its passes).
  const PassContext root_limit = PassContext{}.limited_to(
      detail::memory_limit(group.memory_limit_bytes, g.device()), group.world.world);
  // 0. Many cases, each its own box: CROWN on all the boxes at once proves most of them.
  std::vector<bool> screened(property.cases.size(), false);
  if (property.cases.size() > 1) {
    progress.start("CROWN on every case's box");
    screened = screen_cases(g, property, objectives, options.bab.bound,
                            PassContext::stopping_at({deadline, &progress})
                                .limited_to(root_limit.memory_limit_bytes, root_limit.in_step));
    if (std::all_of(screened.begin(), screened.end(), [](bool p) { return p; })) {
      return decision.finish(Verdict::kUnsat, "CROWN on every case's box");
    }
  }
  // 1. Attack every box.
  progress.start("attack");
  for (size_t i = 0; i < property.cases.size(); ++i) {
    if (screened[i]) continue;
    if (auto cex = pgd_attack(options.bab.attack, Checkpoint{deadline, &progress}, g,
                              property.cases[i], objectives[i])) {
      r.counterexample = cex;
      return decision.finish(Verdict::kSat, "PGD attack");
    }
    if (deadline.expired()) return decision.finish(Verdict::kTimeout, "timeout during the attack");
  }
  // Each group bounds its own share of a round: its passes and attacks agree on the group's
  // deadline, the rounds over the world.
  const BabOptions& bab = options.bab;
  const bool input_split = splits_inputs(options, g, property);
  std::optional<std::pair<Verdict, std::string>> unknown;
  int64_t rounds = 0;
  bool crown_proved = true;  // every root proved by CROWN's bounds, without α steps
  for (size_t i = 0; i < property.cases.size(); ++i) {
    if (screened[i]) continue;
    const io::VnnlibCase& c = property.cases[i];
    const std::vector<Objective>& objs = objectives[i];
    // 2. α-CROWN on every disjunct at once (ReLU splitting).
    CaseRoot root = input_split
                        ? CaseRoot(objs.size())
                        : bound_case_root(g, c, objs, options, deadline, root_limit, progress);
    crown_proved = crown_proved && root.crown_proved;
    r.memory_limited = r.memory_limited || root.memory_limited;
    // 3. Branch and bound on the open disjuncts.
    Searches searches = plan_searches(objs, root, input_split, options.bab.disjuncts);
    for (size_t d = 0; d < searches.objectives.size(); ++d) {
      if (deadline.expired()) {
        return decision.finish(Verdict::kTimeout, "timeout before every disjunct was proved");
      }
      const double bab_start = deadline.elapsed();
      const BabProblem problem{c, searches.objectives[d], objs};
      const BabResult b = input_split ? input_bab(bab, group, g, problem)
                                      : relu_bab(bab, group, g, problem, &searches.starts[d]);
      r.bab_seconds += deadline.elapsed() - bab_start;
      add_search(r, b);
      rounds += b.rounds;
      if (auto v = search_verdict(b)) {
        if (b.status == BabStatus::kFalsified) {
          r.counterexample = b.counterexample;
          if (b.counterexample_group >= 0) r.counterexample_group = b.counterexample_group;
        }
        if (v->first != Verdict::kUnknown) return decision.finish(v->first, v->second);
        unknown = v;
      }
    }
  }
  if (unknown) return decision.finish(Verdict::kUnknown, unknown->second);
  if (!input_split && r.domains_bounded == 0) {
    return decision.finish(Verdict::kUnsat,
                           crown_proved ? "CROWN at the root" : "alpha-CROWN at the root");
  }
  return decision.finish(Verdict::kUnsat, std::string(input_split ? "input" : "relu") +
                                              " branch and bound, " + std::to_string(rounds) +
                                              " rounds");
}

}  // namespace

int64_t free_inputs(const io::VnnlibProperty& property) {
  int64_t most = 0;
  for (const io::VnnlibCase& c : property.cases) {
    int64_t n = 0;
    for (size_t i = 0; i < c.input_lower.size(); ++i) n += c.input_upper[i] > c.input_lower[i];
    most = std::max(most, n);
  }
  return most;
}

bool splits_inputs(const VerifyOptions& options, const BoundGraph& g,
                   const io::VnnlibProperty& property) {
  if (options.split != SplitMode::kAuto) return options.split == SplitMode::kInput;
  return std::min(g.input_numel(), free_inputs(property)) <= options.input_split_max_inputs;
}

std::string verify_refusal(const VerifyOptions& options, const RunLayout& layout,
                           const BoundGraph& g, const io::VnnlibProperty& property) {
  if (layout.groups < 1 || layout.world_size % layout.groups != 0) {
    return "--domain-groups " + std::to_string(layout.groups) + " does not divide the " +
           std::to_string(layout.world_size) + " ranks";
  }
  if (options.bab.cuts) {
    // General split nodes are refused when the search starts (its layout knows them).
    const bool shared =
        layout.groups > 1 || (options.bab.spec_parallel && layout.world_size > layout.groups);
    if (std::string why = cuts_refusal({.splits_inputs = splits_inputs(options, g, property),
                                        .shared = shared,
                                        .tensor_parallel = layout.tensor_parallel});
        !why.empty()) {
      return why;
    }
  }
  if (!options.bab.spec_parallel || layout.world_size == layout.groups) return {};
  // Spec-parallel over groups of several ranks.
  if (splits_inputs(options, g, property)) {
    return "spec-parallel shares ReLU splitting's batches between the ranks of a group; input "
           "splitting (properties with at most " +
           std::to_string(options.input_split_max_inputs) +
           " free inputs, or --split input) is shared by --domain-groups only";
  }
  return spec_parallel_refusal(options.bab, layout.tensor_parallel);
}

VerifyResult verify(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options) {
  RunContext context;
  context.deadline = Deadline(options.timeout_s);
  return verify(options, context, g, property);
}

VerifyResult verify(const VerifyOptions& options, const RunContext& context, const BoundGraph& g,
                    const io::VnnlibProperty& property) {
  c10::NoGradGuard no_grad;
  const BabWorld& world = context.world;
  const RunLayout layout{world.world_size(), world.groups, g.tensor_parallel_group() != nullptr};
  if (std::string why = verify_refusal(options, layout, g, property); !why.empty()) {
    throw InvalidArgument(why);
  }
  const Deadline deadline = context.deadline.agreed_by(collective::expiry_agreement(world.world));
  // Rank 0 prints the progress lines, unless the caller keeps a Progress of its own.
  Progress own_progress(options.bab.progress && world.world_rank() == 0, deadline, g.device());
  Progress& progress = context.progress != nullptr ? *context.progress : own_progress;
  // Each group's branch and bound: its passes agree on the group's deadline.
  RunContext group = context;
  group.deadline = context.deadline.agreed_by(collective::expiry_agreement(world.group));
  group.progress = &progress;
  VerifyResult r;
  Decision decision{r, [&](Verdict v, std::string detail) {
                      // An answer decided after the deadline is a timeout (VNN-COMP counts late
                      // answers so).
                      if ((v == Verdict::kSat || v == Verdict::kUnsat) && deadline.expired()) {
                        detail = to_string(v) + " decided after the deadline (" + detail + ")";
                        v = Verdict::kTimeout;
                        r.counterexample.reset();
                      }
                      r.verdict = v;
                      r.detail = std::move(detail);
                      r.seconds = deadline.elapsed();
                      return r;
                    }};
  try {
    decide(g, property, options, deadline, group, decision);
  } catch (const DeadlineReached&) {
    decision.finish(Verdict::kTimeout, "timeout during " + progress.phase());
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

std::string format_result(const VerifyResult& r, const io::VnnlibProperty& property) {
  std::ostringstream out;
  out << to_string(r.verdict) << "\n";
  if (r.verdict == Verdict::kSat && r.counterexample) {
    char buf[64];
    const auto& x = r.counterexample->x;
    const auto& y = r.counterexample->y;
    if (property.version == 2) {
      // Per network in declaration order: its input's elements, then its output's.
      const auto [xs, ys] = io::declared_values(property, x, y);
      for (const io::NetworkDeclaration& n : property.networks) {
        for (const bool is_output : {false, true}) {
          const int64_t first = is_output ? n.output_offset : n.input_offset;
          const int64_t count = is_output ? n.num_outputs : n.num_inputs;
          for (int64_t i = first; i < first + count; ++i) {
            std::snprintf(buf, sizeof buf, "%.17g", (is_output ? ys : xs).at(size_t(i)));
            out << io::element_name(property, is_output, i) << "=" << buf << "\n";
          }
        }
      }
      return out.str();
    }
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
