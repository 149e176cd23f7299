#pragma once
// Deciding a VNNLIB property: attack first (PGD over every input box), then per box α-CROWN on
// every disjunct at once, then branch and bound on each disjunct still open — input splitting for
// networks with few inputs, β-CROWN ReLU splitting otherwise. "unsat" only when every disjunct of
// every box is proved; "sat" only with a counterexample that passed the concrete check.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown::bab {

enum class Verdict { kSat, kUnsat, kTimeout, kUnknown };

/// Names (util/enum_names.hpp): the VNN-COMP result words.
constexpr auto enum_table(Verdict) {
  using P = std::pair<Verdict, std::string_view>;
  return std::array{P{Verdict::kSat, "sat"}, P{Verdict::kUnsat, "unsat"},
                    P{Verdict::kTimeout, "timeout"}, P{Verdict::kUnknown, "unknown"}};
}

/// Thin wrapper over enum_name.
std::string to_string(Verdict v);

enum class SplitMode { kAuto, kInput, kRelu };

/// Names of the split modes, as --split takes them.
constexpr auto enum_table(SplitMode) {
  using P = std::pair<SplitMode, std::string_view>;
  return std::array{P{SplitMode::kAuto, "auto"}, P{SplitMode::kInput, "input"},
                    P{SplitMode::kRelu, "relu"}};
}

struct VerifyOptions {
  double timeout_s = 300;  // 0 = none; read by the overload without a RunContext
  /// Branch and bound's options, with bab.bound the options of every bounding pass (the
  /// root's α-CROWN included).
  BabOptions bab;
  SplitMode split = SplitMode::kAuto;
  /// kAuto splits inputs when the property leaves at most this many of them free (lower <
  /// upper in some case: nn4sys's pensieve fixes 64 of its 96 inputs).
  int64_t input_split_max_inputs = 32;
};

/// The most inputs that one case of `property` leaves free (lower < upper).
int64_t free_inputs(const io::VnnlibProperty& property);

/// Whether verify() searches `g` by splitting its inputs (else its ReLUs): the one place that
/// decides it (the CLI's choice of intermediate scheme asks it too).
bool splits_inputs(const VerifyOptions& options, const BoundGraph& g,
                   const io::VnnlibProperty& property);

/// How the ranks of a run are laid out, as the option checks need it.
struct RunLayout {
  int world_size = 1;
  int groups = 1;                // domain groups (--domain-groups)
  bool tensor_parallel = false;  // the graph is (or will be) sharded tensor-parallel
};

/// Why verify() cannot run `options` in `layout` on `g` (empty when it can): every refusal of an
/// option combination, each written once: domain groups that do not divide the ranks, and
/// spec-parallel branch and bound (over groups of several ranks) with input splitting, refreshed
/// intermediate bounds or tensor parallelism. The CLI asks before it shards; verify() refuses.
std::string verify_refusal(const VerifyOptions& options, const RunLayout& layout,
                           const BoundGraph& g, const io::VnnlibProperty& property);

struct VerifyResult {
  Verdict verdict = Verdict::kUnknown;
  std::optional<Counterexample> counterexample;
  std::string detail;           // how it was decided (attack, alpha-crown, bab rounds), or why not
  int64_t domains_bounded = 0;  // over every rank (distinct domains)
  std::vector<int64_t> domains_per_group;
  int64_t domains_moved = 0;
  int64_t domains_moved_in_groups = 0;  // spec-parallel: between the ranks of a group
  /// The domain group whose branch-and-bound round found the counterexample; none when it was
  /// found by the attack or at a branch and bound's root (every group bounds the root).
  std::optional<int> counterexample_group;
  /// The lowest domain value left in the last branch and bound that did not prove its disjunct
  /// (max_k (lb_k − rhs_k) < 0); none when every branch and bound proved or none ran.
  std::optional<double> worst_bound;
  double bab_seconds = 0;         // in branch and bound (after the attack and the root)
  double bab_attack_seconds = 0;  // of it, in the rounds' attacks (BabResult::attack_seconds)
  /// Branch and bound searches run; whether every one's rounds ran planned passes (false: none
  /// ran, or some ran CrownEngine's), and the floating-point operations of the planned passes'
  /// products.
  int bab_searches = 0;
  int64_t bab_rounds = 0;  // over every search
  bool bab_planned = false;
  int64_t bab_pass_flops = 0;
  CutCounts cuts;                  // summed over the searches (BabOptions::cuts)
  collective::CommStats exchange;  // this rank's round exchanges (BabResult::exchange), summed
  /// The smallest batch a ReLU-splitting round ran with (0: none ran), and whether the memory
  /// limit (RunContext::memory_limit_bytes) shrank a batch, ended a branch and bound or stopped
  /// the root α-CROWN's optimisation (AlphaResult::memory_limited).
  int64_t bab_min_batch = 0;
  bool memory_limited = false;
  double seconds = 0;
};

/// Decides within options.timeout_s seconds from now, in one process.
VerifyResult verify(const BoundGraph& g, const io::VnnlibProperty& property,
                    const VerifyOptions& options);
/// Decides by context.deadline (options.timeout_s is not read; the deadline is agreed over the
/// ranks of context.world, which all call verify together and get the same result): every phase
/// stops at it (the attack between steps, CROWN and α-CROWN between nodes and iterations, branch
/// and bound between rounds and inside their passes) and the answer is then `timeout`; a sat or
/// unsat reached only after it is reported as `timeout` too. Progress lines on stderr go to
/// context.progress, or, with options.bab.progress, to rank 0's own: one per phase, then at most
/// one a second. Throws InvalidArgument with verify_refusal()'s reason.
VerifyResult verify(const VerifyOptions& options, const RunContext& context, const BoundGraph& g,
                    const io::VnnlibProperty& property);

/// The VNN-COMP result text: the verdict line, and for sat the counterexample: for a 1.0
/// property "((X_0 v)\n (X_1 v)\n ... (Y_0 v)...)", for a 2.0 one a line "X[0]=v" per element
/// in declaration order (the network's input, then its output), as the VNN-LIB 2.0 standard's
/// command-line interface prints it.
std::string format_result(const VerifyResult& r, const io::VnnlibProperty& property);

}  // namespace distcrown::bab
