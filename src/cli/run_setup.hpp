#pragma once
// How both commands start, one path on every rank of a job: load the model and property, check
// the options against them, agree (a failure on any rank stops every rank; ranks that read other
// files or options are refused), then place the problem: cast to --dtype, shard over the ranks
// that share a model (--shard: FSDP's weights, or a tensor-parallel plan) and move it to
// --device. `bounds` shards over the world, `verify` over each domain group.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cli/options.hpp"
#include "cli/problem_input.hpp"
#include "distcrown/collective/communicator.hpp"

namespace distcrown::cli {

/// Every rank's files and every option value (RunOptions::option_values), as one fingerprint
/// (collective::fingerprint) that the ranks compare.
std::string run_fingerprint(const RunOptions& a, const ProblemInput& in);

/// Loads the problem on every rank and runs `check` on it (a refusal of the options, a deadline
/// passed while loading), agreed over `world` (collective::run_agreed); then compares the ranks'
/// run_fingerprint (collective::check_same_inputs). `read`: the files, when already read.
ProblemInput load_agreed(const RunOptions& a, collective::Communicator& world,
                         const std::function<void(const ProblemInput&)>& check,
                         std::optional<ReadProblem> read = std::nullopt,
                         bool may_peel_softmax = false);

/// What placing the problem did on this rank.
struct Placement {
  std::string tp_plan;      // a tensor-parallel plan's description (sharding::describe); or empty
  int64_t param_bytes = 0;  // this rank's resident weights after sharding (FSDP: its shards)
};

/// Casts the graph to --dtype, shards it by --shard over `group` and moves it to --device, then
/// runs `then` (a deadline check), agreed over `world`.
Placement place(const RunOptions& a, BoundGraph& g, collective::Communicator& world,
                const collective::CommPtr& group, const std::function<void()>& then = {});

/// --memory-limit in bytes: its MB, or (0) half of this rank's available memory, the host's or
/// the GPU's with --device cuda.
int64_t memory_limit_bytes(const RunOptions& a);

}  // namespace distcrown::cli
