#pragma once
// The CLI's option model: ONE table (options.cpp) declares every option once — long name, help,
// the commands it applies to, and the field of RunOptions it sets. RunOptions holds the library's
// option structs themselves, so each default is the one declared there. Both subcommands register
// the whole table (one --help, one README table); an option given to a command it does not apply
// to is an error. `--config FILE.yaml` (keys: the long names) is expanded into command-line
// arguments placed before the user's own, so the command line wins.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "distcrown/bab/verifier.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {

enum class Command { kBounds, kVerify };
constexpr auto enum_table(Command) {
  using P = std::pair<Command, std::string_view>;
  return std::array{P{Command::kBounds, "bounds"}, P{Command::kVerify, "verify"}};
}

/// --intermediate: the library's schemes, plus auto (verify: tight_unstable when splitting the
/// inputs, else auto_lirpa; bounds: auto_lirpa).
enum class Intermediate { kAuto, kAutoLirpa, kTight, kEvery, kTightUnstable };
constexpr auto enum_table(Intermediate) {
  using P = std::pair<Intermediate, std::string_view>;
  return std::array{P{Intermediate::kAuto, "auto"}, P{Intermediate::kAutoLirpa, "auto_lirpa"},
                    P{Intermediate::kTight, "tight"}, P{Intermediate::kEvery, "every"},
                    P{Intermediate::kTightUnstable, "tight_unstable"}};
}
/// The library's scheme for --intermediate; `auto` gives `auto_default`.
inline IntermediateScheme scheme_of(Intermediate i, IntermediateScheme auto_default) {
  switch (i) {
    case Intermediate::kAutoLirpa:
      return IntermediateScheme::kAutoLirpa;
    case Intermediate::kTight:
      return IntermediateScheme::kTight;
    case Intermediate::kEvery:
      return IntermediateScheme::kEvery;
    case Intermediate::kTightUnstable:
      return IntermediateScheme::kTightUnstable;
    case Intermediate::kAuto:
      break;
  }
  return auto_default;
}

enum class Dtype { kFloat32, kFloat64 };
constexpr auto enum_table(Dtype) {
  using P = std::pair<Dtype, std::string_view>;
  return std::array{P{Dtype::kFloat32, "float32"}, P{Dtype::kFloat64, "float64"}};
}

enum class Device { kCpu, kCuda };
constexpr auto enum_table(Device) {
  using P = std::pair<Device, std::string_view>;
  return std::array{P{Device::kCpu, "cpu"}, P{Device::kCuda, "cuda"}};
}

/// auto: MPI when launched by mpirun (NCCL with --device cuda), else local.
enum class Backend { kAuto, kLocal, kMpi, kNccl };
constexpr auto enum_table(Backend) {
  using P = std::pair<Backend, std::string_view>;
  return std::array{P{Backend::kAuto, "auto"}, P{Backend::kLocal, "local"}, P{Backend::kMpi, "mpi"},
                    P{Backend::kNccl, "nccl"}};
}

/// A bad option or --config file: the same on every rank, so under mpirun only rank 0 reports it.
class UsageError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// Everything a command reads from its options.
struct RunOptions {
  // The library's option structs: their defaults are the CLI's.
  BoundOptions bound;         // --crown-batch-size (scheme: from --intermediate)
  AlphaOptions alpha;         // --iterations, --lr (verify: the root α-CROWN)
  bab::VerifyOptions verify;  // --timeout (both), --bab-batch-size, --bab-iterations, ...
  // CLI-only.
  std::string model;
  std::string vnnlib;
  std::string result;
  std::string report;  // verify: JSON summary (result, time, peak memory)
  std::string config;
  Method method = Method::kCrown;
  Intermediate intermediate = Intermediate::kAuto;
  Dtype dtype = Dtype::kFloat32;
  Device device = Device::kCpu;
  Backend backend = Backend::kAuto;
  sharding::ShardPlan shard = sharding::ShardPlan::kNone;
  bool spec_parallel = false;
  int domain_groups = 1;  // verify: BabWorld::groups
  /// Communicator::set_collective_timeout of the world (and the groups split from it).
  double collective_timeout_s = collective::kDefaultCollectiveTimeoutSeconds;
  /// verify: bab::RunContext::memory_limit_bytes in MB (10^6 bytes); 0 = the library's default.
  int64_t memory_limit_mb = 0;
  /// Intra-op (OpenMP) threads. Branch and bound runs many small operations; on a 2-core VM
  /// rounds measured 4-200x slower with 2 threads than 1, hence 1 for both commands.
  int threads = 1;
  bool quiet = false;
  /// Every option's value after parsing (CLI11's configuration text, defaults included): the
  /// ranks of a job compare it (cli/run_setup.hpp, run_fingerprint).
  std::string option_values;
};

/// Throws (one line) when `device` is cuda and no CUDA device is usable in this process; the same
/// on every rank of a job, so reported once.
void require_usable_device(Device device);

/// Adds the subcommand `command` with every option of the table; the action it returns refuses
/// options that do not apply (check_applies), then calls `run` with the parsed options.
std::function<int()> add_command(CLI::App& app, Command command, const std::string& description,
                                 std::function<int(const RunOptions&)> run);

/// Registers every option of the table on `cmd`, bound to `run` (which must outlive `cmd`).
void add_options(CLI::App& cmd, RunOptions& run);

/// After parsing: an option given that does not apply to `command` is a UsageError
/// "--branching applies to verify only".
void check_applies(const CLI::App& cmd, Command command);

/// The arguments (argv without the program name) with the `--config FILE` of the subcommand
/// expanded: "--key=value" for each key of the YAML file, inserted right after the subcommand
/// name so that the command line's own options (later) win. Unknown keys, keys that do not apply
/// to the command, and non-scalar values are InvalidArgument naming the key and the file.
std::vector<std::string> expand_config(const std::vector<std::string>& args);

/// The subcommand named in `args` (its first non-option argument), if it is one.
std::optional<Command> scan_command(const std::vector<std::string>& args);

/// The last `--result X` / `--result=X` in `args` ("" when none): where verify writes `error`
/// when parsing failed.
std::string scan_result(const std::vector<std::string>& args);

}  // namespace distcrown::cli
