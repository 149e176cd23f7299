#pragma once
// Branch and bound over one objective (a VNNLIB disjunct): common options, results and the
// deadline / progress helpers shared by ReLU splitting (β-CROWN) and input splitting.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distcrown/bab/attack.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/util/deadline.hpp"
#include "distcrown/util/memory.hpp"

namespace distcrown::bab {

enum class Branching { kBabsr, kFsb };

/// Names of the branching heuristics (util/enum_names.hpp), as --branching takes them.
constexpr auto enum_table(Branching) {
  using P = std::pair<Branching, std::string_view>;
  return std::array{P{Branching::kBabsr, "babsr"}, P{Branching::kFsb, "fsb"}};
}

/// Which implementation runs the passes a search repeats: a plan made once where the graph and
/// options allow it (a chain of affine nodes and ReLUs on the CPU: methods/planned_chain.hpp for
/// input splitting, methods/planned_beta.hpp for ReLU splitting), else CrownEngine's generic
/// passes; kReference runs CrownEngine's everywhere.
enum class PassPath { kPlanned, kReference };

constexpr auto enum_table(PassPath) {
  using P = std::pair<PassPath, std::string_view>;
  return std::array{P{PassPath::kPlanned, "planned"}, P{PassPath::kReference, "reference"}};
}

/// How a split's two children are reduced to one number where branching compares splits
/// (α,β-CROWN's branching reduceop): FSB keeps the candidate whose worse (kMin) or better (kMax)
/// child bounds best; BaBSR's score takes the smaller or larger of its two bias estimates.
enum class BranchingReduce { kMin, kMax };

constexpr auto enum_table(BranchingReduce) {
  using P = std::pair<BranchingReduce, std::string_view>;
  return std::array{P{BranchingReduce::kMin, "min"}, P{BranchingReduce::kMax, "max"}};
}

/// Whose batch BabOptions::batch is when the search runs in several domain groups: the world's
/// (a round bounds `batch` parents in all, each group its share: under `deterministic` the search
/// of one process at every layout) or each group's (a round bounds `batch` parents per group,
/// batch · groups in all: each group's round as full as one process's, which is what scales,
/// docs/scaling.md). kAuto: kGroup, or kWorld under `deterministic`. One group: the same.
enum class BatchScope { kAuto, kWorld, kGroup };

constexpr auto enum_table(BatchScope) {
  using P = std::pair<BatchScope, std::string_view>;
  return std::array{P{BatchScope::kAuto, "auto"}, P{BatchScope::kWorld, "world"},
                    P{BatchScope::kGroup, "group"}};
}

class Progress;

/// The ranks one branch and bound runs on (docs/architecture.md, "Branch and bound across
/// ranks"). The world's ranks form `groups` groups of world_size / groups consecutive ranks; the
/// ranks of a group hold the same queue and bound the same domains together (under
/// BabOptions::spec_parallel each its own share of both), the model sharded over `group`
/// (FSDP) or replicated; the groups share one global queue: every round the
/// `batch` worst domains over all groups are bounded, each group taking its share. Null
/// communicators: one process.
struct BabWorld {
  collective::CommPtr world;
  collective::CommPtr group;
  int groups = 1;
  [[nodiscard]] int world_size() const { return world ? world->size() : 1; }
  [[nodiscard]] int world_rank() const { return world ? world->rank() : 0; }
  [[nodiscard]] int group_size() const { return world_size() / groups; }
  [[nodiscard]] int group_index() const { return world_rank() / group_size(); }
  /// The rank that speaks for its group in the round exchange.
  [[nodiscard]] bool group_leader() const { return world_rank() % group_size() == 0; }
};

struct BabOptions;

/// Parents a round bounds over the world: BabOptions::batch, times the domain groups where the
/// batch is each group's (BatchScope).
int64_t round_batch(const BabOptions& o, const BabWorld& w);

/// Intermediate bounds of a ReLU-split domain below the root: kept from the root (only split
/// neurons clamped), or refreshed after every split by a CROWN pass over the layers after the
/// domain batch's earliest split, intersected with the ones kept (never looser).
enum class BabIntermediate { kFixed, kRefresh };

constexpr auto enum_table(BabIntermediate) {
  using P = std::pair<BabIntermediate, std::string_view>;
  return std::array{P{BabIntermediate::kFixed, "fixed"}, P{BabIntermediate::kRefresh, "refresh"}};
}

/// How ReLU splitting searches a case whose disjuncts α-CROWN leaves open: one search over all of
/// them (a domain is done when every one is impossible on it; the splits serve every disjunct,
/// and a pass bounds all their rows at once), or one search per disjunct, one after another.
enum class DisjunctSearch { kJoined, kEach };

constexpr auto enum_table(DisjunctSearch) {
  using P = std::pair<DisjunctSearch, std::string_view>;
  return std::array{P{DisjunctSearch::kJoined, "joined"}, P{DisjunctSearch::kEach, "each"}};
}

struct BabOptions {
  /// Domains taken from the queue per round (over the world or per group: batch_scope); their
  /// 2·batch children are bounded in one call.
  int64_t batch = 64;
  BatchScope batch_scope = BatchScope::kAuto;
  Branching branching = Branching::kFsb;
  /// FSB: per domain, the best neurons by each of BaBSR's two scores whose splits are tried
  /// (up to 2·fsb_candidates; bab/branching.hpp).
  int fsb_candidates = 3;
  BranchingReduce branching_reduce = BranchingReduce::kMin;
  int iterations = 20;  // α/β optimisation steps per round (ReLU splitting)
  BabIntermediate intermediate = BabIntermediate::kFixed;
  DisjunctSearch disjuncts = DisjunctSearch::kEach;  // ReLU splitting only
  double lr_alpha = 0.1;
  double lr_beta = 0.05;
  int root_iterations = 20;  // α-CROWN at the root
  double root_lr = 0.5;
  /// Same work at any world size and every run: fixed batch, no early exit from the
  /// optimisation when a batch is proved, no adaptive resizing.
  bool deterministic = false;
  int64_t max_rounds = 0;  // 0 = until decided or timeout
  int attack_every = 5;    // rounds between attacks from the worst domains (0 = never)
  /// Spec-parallel ReLU splitting: the ranks of a domain group (world.group) split every batch
  /// of domains between them and bound their shares in the same passes. Each rank keeps the
  /// domains it bounded (its own queue; a round's plan balances the batch over the ranks as over
  /// groups), so the queue, the passes' A matrices, α, β and autograd state per rank are a share
  /// of the group's. Not with BabIntermediate::kRefresh.
  bool spec_parallel = false;
  AttackOptions attack;
  /// Progress lines on stderr, at most once a second: printed by a run whose RunContext has no
  /// Progress of its own (verify's is made from this too).
  bool progress = false;
  /// The bounding passes' options: the root's α-CROWN and every round's passes.
  BoundOptions bound;
  PassPath passes = PassPath::kPlanned;
  /// Measure the bytes the queued domains hold after every round (BabResult::peak_store; ReLU
  /// splitting): the memory benchmark's breakdown, a walk over the queue each round.
  bool measure_store = false;
  /// Cuts from verified subproblems (ReLU splitting, one domain group, no spec-parallel or
  /// tensor parallelism): each proved domain's decisions with positive β, proved again from the
  /// root, become a nogood that prunes later domains inside it and splits those inside all but
  /// one of its decisions (src/bab/cut_pool.hpp).
  bool cuts = false;
};

enum class BabStatus { kProved, kFalsified, kTimeout, kUnknown };

/// Bytes the queued domains hold, by kind (the memory benchmark's breakdown), at the round where
/// their total peaked.
struct DomainStoreBytes {
  int64_t alpha = 0;
  int64_t beta = 0;
  int64_t bounds = 0;  // intermediate bounds (lower and upper)
  int64_t other = 0;   // split decisions and branching scores
  [[nodiscard]] int64_t total() const { return alpha + beta + bounds + other; }
};

/// What the cut pool did (BabOptions::cuts).
struct CutCounts {
  int64_t checked = 0;  // reduced conjunctions bounded again
  int64_t learned = 0;  // of those, proved: nogoods in the pool
  int64_t pruned = 0;   // domains proved by a nogood without a pass
  int64_t implied = 0;  // splits a nogood forced on a domain
  CutCounts& operator+=(const CutCounts& o) {
    checked += o.checked;
    learned += o.learned;
    pruned += o.pruned;
    implied += o.implied;
    return *this;
  }
};

struct BabResult {
  BabStatus status = BabStatus::kUnknown;
  std::optional<Counterexample> counterexample;
  int counterexample_group = -1;  // the domain group whose round found it (-1: none, the root)
  int64_t rounds = 0;
  int64_t domains_bounded = 0;  // over every group
  std::vector<int64_t> domains_per_group;
  int64_t domains_moved = 0;  // domains sent from one group to another
  /// Spec-parallel: domains sent from one rank of a group to another (each rank keeps the
  /// domains it bounded; a round's batch is balanced over the group's ranks).
  int64_t domains_moved_in_groups = 0;
  int64_t max_queue = 0;
  double worst_value = 0;  // lowest domain value left (when not proved)
  std::string reason;      // why unknown
  /// The smallest batch any round was planned with (0: no round ran), and whether the memory
  /// limit made it smaller than BabOptions::batch or ended the search.
  int64_t min_batch = 0;
  bool memory_limited = false;
  /// With BabOptions::measure_store: the queue's bytes at their peak.
  DomainStoreBytes peak_store;
  /// Whether the rounds' passes ran planned (PassPath::kPlanned where it applied), and the
  /// floating-point operations of their products (planned passes count them; 0 otherwise).
  bool planned = false;
  int64_t pass_flops = 0;
  CutCounts cuts;
  /// This rank's round exchanges: the world's control messages during the rounds (their
  /// seconds include waiting for the slowest group).
  collective::CommStats exchange;
  /// This rank's seconds in the rounds' attacks (PGD from the round's domains every
  /// attack_every rounds, and checking the points the bounds give): the part of a round that
  /// domain groups share out (docs/scaling.md).
  double attack_seconds = 0;
};

/// Why ReLU branch and bound cannot share its batches between a group's ranks
/// (BabOptions::spec_parallel) with `o`, on a tensor-parallel graph or not; empty when it can.
/// Refreshed intermediate bounds bound each domain's own unstable neurons, a different number of
/// passes in each rank's share; tensor-parallel layers need every rank in the same passes.
std::string spec_parallel_refusal(const BabOptions& o, bool tensor_parallel);

/// What decides whether a branch and bound can keep a cut pool (BabOptions::cuts).
struct CutsSetting {
  bool splits_inputs = false;    // input splitting: cuts are made of ReLU splits
  bool shared = false;           // domain groups, or spec-parallel over several ranks
  bool tensor_parallel = false;  // the graph's layers are sliced over ranks
  bool general_splits = false;   // the search also splits general nonlinearities
};
/// Why `s` rules out --cuts, as a one-line error ("--cuts: ..."); empty when it does not. One
/// pool per search: shared or sliced searches would each learn their own, and the search would
/// no longer be one process's.
std::string cuts_refusal(const CutsSetting& s);

/// The default memory limit: half of the memory available now: on the CPU what the OS reports
/// (Linux /proc/meminfo MemAvailable; 0 where that is not known: no limit), on a CUDA device
/// its free memory (cudaMemGetInfo).
int64_t default_memory_limit_bytes(bool cuda = false);

/// The deadline (util/deadline.hpp), as the branch-and-bound API has always named it.
using Deadline = distcrown::Deadline;

/// Progress lines on stderr: one when a phase starts, then at most one a second — from every
/// branch-and-bound round and, as the Heartbeat of the bounding passes' checkpoints, from inside
/// a long CROWN or α-CROWN pass — so that a run prints at least every few seconds whatever it is
/// doing. Each line: the phase, seconds since the deadline's start, the round, domains bounded
/// and in the queue and the worst bound (once a branch and bound has started), and the peak
/// resident memory with the tensors' own peak on `device` (memory::usage(device)).
class Progress final : public Heartbeat {
 public:
  Progress(bool enabled, const Deadline& deadline, const c10::Device& device = c10::kCPU)
      : enabled_(enabled), device_(device), deadline_(deadline) {}
  /// A new phase ("attack", "root alpha-CROWN", "bab (relu splits)"): printed at once.
  void start(std::string phase);
  /// The state of a branch and bound before a round; printed when a second has passed.
  void report(int64_t rounds, int64_t bounded, int64_t queued, double worst);
  /// From a checkpoint: prints when a second has passed.
  void beat() override;
  [[nodiscard]] const std::string& phase() const { return phase_; }

 private:
  void print();

  bool enabled_;
  c10::Device device_;
  Deadline deadline_;
  std::string phase_;
  int64_t rounds_ = -1;  // -1: no branch and bound in this phase
  int64_t bounded_ = 0;
  int64_t queued_ = 0;
  double worst_ = 0;
  double last_ = -1.0;
};

/// What a search that ran out of time leaves behind (its queue of open domains), kept until the
/// caller has answered: freeing ~25,000 domains' tensors outlasted verify's 0.25 s watchdog grace
/// at the end of 60 s searches on this VM (two ranks), so the answer came from the watchdog,
/// without the report's counts, and mpirun exited 1. A caller that ends the process after
/// answering never pays for it.
class Leftovers {
 public:
  void keep(std::shared_ptr<void> p) { kept_.push_back(std::move(p)); }
  [[nodiscard]] size_t size() const { return kept_.size(); }

 private:
  std::vector<std::shared_ptr<void>> kept_;
};

/// What a run carries that is not configuration: when it must stop, where its progress goes and
/// which ranks take part. Option structs (BabOptions, VerifyOptions) hold configuration only; the
/// caller makes a context per run and passes it to what runs.
struct RunContext {
  /// Every phase stops at it. Across ranks every rank calls together: verify() agrees it over the
  /// world for its phases and over the group for a branch and bound's passes
  /// (Deadline::agreed_by), the rounds agreeing over the world themselves.
  Deadline deadline;
  /// Where the progress lines go (one Progress kept across phases); null: a branch and bound
  /// with BabOptions::progress prints its own. Not owned.
  Progress* progress = nullptr;
  /// The ranks (null communicators: one process).
  BabWorld world;
  /// Tensor bytes that ReLU splitting may hold, on the graph's device (the memory accountant's
  /// live_bytes() on the CPU, the CUDA caching allocator's allocated bytes on a GPU;
  /// util/memory.hpp): each round's batch is the largest (<= BabOptions::batch, at most doubling
  /// per round) whose cost per domain, measured in the last round, fits under it with what is
  /// live; when not even one domain fits (or, deterministic, the fixed batch does not), the
  /// search stops unknown. 0 = default_memory_limit_bytes(graph on CUDA), read when the branch
  /// and bound starts. On the CPU it needs the counting allocator installed (an explicit limit is
  /// refused otherwise: nothing would enforce it).
  int64_t memory_limit_bytes = 0;
  /// Where a branch and bound that timed out leaves its queue (not owned); null: freed at once.
  Leftovers* leftovers = nullptr;
};

/// What one branch and bound decides: `objective` (one VNNLIB disjunct, or several joined) over
/// the case's input box; `disjuncts` are all of the case's, which the attacks try. Not owned.
struct BabProblem {
  const io::VnnlibCase& vnnlib_case;
  const Objective& objective;
  const std::vector<Objective>& disjuncts;
};

}  // namespace distcrown::bab
