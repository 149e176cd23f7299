#include "cli/options.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>

#include <ATen/Context.h>
#include <yaml-cpp/yaml.h>

#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {
namespace {

/// The commands an option applies to.
enum class Applies { kBoth, kBounds, kVerify };

/// Adds the option "--name" bound to its field of RunOptions.
using Binder = std::function<CLI::Option*(CLI::App&, RunOptions&, const std::string& flag,
                                          const std::string& help)>;

struct OptionSpec {
  std::string_view name;  // long name without the dashes; also the YAML key
  Applies applies;
  std::string_view help;
  Binder bind;
};

// A number that is finite and >= 0 (> 0 when `positive`): CLI11's NonNegativeNumber and
// PositiveNumber let NaN through (every comparison with NaN is false).
CLI::Validator finite_number(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < 0 ||
            (positive && v == 0)) {
          return "must be a finite number " + std::string(positive ? "> 0" : ">= 0") + ", got " +
                 text;
        }
        return {};
      },
      positive ? "FINITE > 0" : "FINITE >= 0");
}

// At least `lo` and within the field's type T: CLI11 parses an integer that overflows T as T's
// largest value (--max-rounds 18446744073709551616 ran without a limit), so the text is compared
// as a double first.
template <class T>
CLI::Validator whole_number(T lo) {
  return CLI::Range(static_cast<double>(lo), static_cast<double>(std::numeric_limits<T>::max()));
}

// --memory-limit in MB: more than this overflows the bytes.
constexpr int64_t kMaxMemoryLimitMb = std::numeric_limits<int64_t>::max() / 1000000;

// Intra-op threads: more than this is refused (a value such as 100000 made LibTorch hang).
constexpr int kMaxThreads = 256;

// One binder for every field type: a bool is a flag, an enum takes the names of its table
// (util/enum_names.hpp), anything else is a value shown with its default.
template <class Get>
Binder field(Get get, const std::optional<CLI::Validator>& check = std::nullopt) {
  return [get, check](CLI::App& app, RunOptions& run, const std::string& flag,
                      const std::string& help) -> CLI::Option* {
    auto& value = get(run);
    using T = std::remove_reference_t<decltype(value)>;
    CLI::Option* opt = nullptr;
    if constexpr (std::is_same_v<T, bool>) {
      opt = app.add_flag(flag, value, help);
    } else if constexpr (std::is_enum_v<T>) {
      std::string names;
      for (std::string_view n : enum_names<T>()) {
        names += (names.empty() ? "" : "|") + std::string(n);
      }
      opt = app.add_option_function<std::string>(
                   flag,
                   [&value, flag](const std::string& s) {
                     try {
                       value = parse_enum<T>(s, "value");
                     } catch (const InvalidArgument& e) {
                       // A usage error like CLI11's own ("--method: unknown value ...").
                       throw CLI::ValidationError(flag, e.what());
                     }
                   },
                   help)
                ->type_name(names)
                ->default_str(std::string(enum_name(value)));
    } else {
      opt = app.add_option(flag, value, help)->capture_default_str();
    }
    if (check) opt->check(*check);
    return opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
}

// A file to write: any non-empty path.
CLI::Validator output_path() {
  return CLI::Validator(
      [](std::string& path) { return path.empty() ? std::string("empty path") : ""; }, "FILE");
}

// Branch and bound's own options (verify only), in the table's order.
std::vector<OptionSpec> bab_specs() {
  return {
      {"bab-batch-size", Applies::kVerify,
       "domains split per branch-and-bound round (per domain group: --bab-batch-scope)",
       field(
           [](RunOptions & r) -> auto& { return r.verify.bab.batch; }, whole_number(int64_t{1}))},
      {"bab-batch-scope", Applies::kVerify,
       "whose batch --bab-batch-size is under --domain-groups G: world (a round splits that many "
       "in all; --deterministic then searches as one process does) or group (each group splits "
       "that many, G times as many a round); auto: group, world under --deterministic",
       field([](RunOptions & r) -> auto& { return r.verify.bab.batch_scope; })},
      {"bab-iterations", Applies::kVerify,
       "alpha/beta optimisation steps per branch-and-bound round",
       field(
           [](RunOptions & r) -> auto& { return r.verify.bab.iterations; }, whole_number(1))},
      {"bab-lr-alpha", Applies::kVerify,
       "Adam learning rate of the slopes (alpha) in branch-and-bound rounds",
       field(
           [](RunOptions & r) -> auto& { return r.verify.bab.lr_alpha; }, finite_number(true))},
      {"bab-lr-beta", Applies::kVerify,
       "Adam learning rate of the split multipliers (beta) in branch-and-bound rounds",
       field(
           [](RunOptions & r) -> auto& { return r.verify.bab.lr_beta; }, finite_number(true))},
      {"bab-intermediate", Applies::kVerify,
       "intermediate bounds below the root of a ReLU-splitting branch and bound: fixed (the "
       "root's, split neurons clamped) or refresh (CROWN over the layers after each split)",
       field([](RunOptions & r) -> auto& { return r.verify.bab.intermediate; })},
      {"bab-disjuncts", Applies::kVerify,
       "ReLU splitting over the disjuncts alpha-CROWN leaves open: joined (one search, a domain "
       "done when all are impossible on it) or each (one search per disjunct)",
       field([](RunOptions & r) -> auto& { return r.verify.bab.disjuncts; })},
      {"branching", Applies::kVerify, "ReLU branching heuristic",
       field([](RunOptions & r) -> auto& { return r.verify.bab.branching; })},
      {"fsb-candidates", Applies::kVerify,
       "fsb: per domain, the best K neurons by each of BaBSR's two scores whose splits are tried",
       field(
           [](RunOptions & r) -> auto& { return r.verify.bab.fsb_candidates; }, whole_number(1))},
      {"branching-reduce", Applies::kVerify,
       "how branching rates a split by its two children: min (the worse child's bound) or max "
       "(the better child's)",
       field([](RunOptions & r) -> auto& { return r.verify.bab.branching_reduce; })},
      {"passes", Applies::kVerify,
       "planned (branch and bound's passes on a chain of affine layers and ReLUs, input or "
       "ReLU splitting, run through a plan made once: BLAS products, fused loops, closed-form "
       "alpha/beta gradients) or reference (the generic engine and autograd)",
       field([](RunOptions & r) -> auto& { return r.verify.bab.passes; })},
      {"split", Applies::kVerify,
       "auto (input splitting for <= 32 free inputs, else ReLU splitting), input or relu",
       field([](RunOptions & r) -> auto& { return r.verify.split; })},
      {"domain-groups", Applies::kVerify,
       "under mpirun: split the ranks into G groups (G divides the ranks) that bound their own "
       "domains of every branch-and-bound round",
       field(
           [](RunOptions & r) -> auto& { return r.domain_groups; }, whole_number(1))},
      {"cuts", Applies::kVerify,
       "ReLU splitting: cuts from verified subproblems (each proved domain's splits that its "
       "bound used, proved again from the root, prune and split later domains); one domain "
       "group, no spec-parallel or tensor parallelism",
       field([](RunOptions & r) -> auto& { return r.verify.bab.cuts; })},
      {"deterministic", Applies::kVerify,
       "fixed batches, no early exits: the same work on every run",
       field([](RunOptions & r) -> auto& { return r.verify.bab.deterministic; })}};
}

// The table. Defaults are those of the fields (RunOptions and the library's option structs).
const std::vector<OptionSpec>& table() {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> s = {
        {"model", Applies::kBoth, "ONNX model (default: the embedded digits MLP)",
         field(
             [](RunOptions & r) -> auto& { return r.model; }, CLI::ExistingFile)},
        {"vnnlib", Applies::kBoth, "VNNLIB property (default: the embedded one)",
         field(
             [](RunOptions & r) -> auto& { return r.vnnlib; }, CLI::ExistingFile)},
        {"result", Applies::kBoth,
         "bounds: write the bounds as JSON here; verify: write the VNN-COMP result here (`error` "
         "on any failure)",
         field(
             [](RunOptions & r) -> auto& { return r.result; }, output_path())},
        {"report", Applies::kVerify,
         "write a JSON summary here: result, time_s (since the process started), world_size, "
         "groups, shard, split (input or relu: what branch and bound splits), intermediate (the "
         "scheme of the bounding passes), domains_bounded, domains_per_group, domains_moved "
         "(between groups), domains_moved_in_groups (spec-parallel: between a group's ranks), "
         "counterexample_group, bab_min_batch, bab_passes (planned or reference), bab_pass_flops, "
         "bab_rounds, bab_attack_time_s (rank 0's, in the rounds' attacks), cuts (--cuts: checked, "
         "learned, pruned, implied), "
         "memory (peak_bytes resident, the largest over the "
         "ranks, and per rank; limit_bytes), comm",
         field(
             [](RunOptions & r) -> auto& { return r.report; }, output_path())},
        {"method", Applies::kBounds, "bounding method",
         field([](RunOptions & r) -> auto& { return r.method; })},
        {"iterations", Applies::kBoth,
         "alpha-CROWN optimisation steps (bounds: --method alpha-crown; verify: at the root)",
         field(
             [](RunOptions & r) -> auto& { return r.alpha.iterations; }, whole_number(1))},
        {"lr", Applies::kBoth, "alpha-CROWN: Adam learning rate for the slopes",
         field(
             [](RunOptions & r) -> auto& { return r.alpha.lr; }, finite_number(true))},
        {"intermediate", Applies::kBoth,
         "intermediate bounds: auto (tight_unstable when verify splits the inputs, else "
         "auto_lirpa), auto_lirpa (matches auto_LiRPA), tight (CROWN for every neuron, intersected "
         "with IBP), tight_unstable (tight for the neurons IBP leaves unstable, each box its own) "
         "or "
         "every (CROWN for every neuron, not intersected: auto_LiRPA without sparse intermediate "
         "bounds)",
         field([](RunOptions & r) -> auto& { return r.intermediate; })},
        {"crown-batch-size", Applies::kBoth,
         "bound at most N intermediate neurons per backward pass (0 = as many as keep a pass's A "
         "matrices near 256 MB)",
         field(
             [](RunOptions & r) -> auto& { return r.bound.crown_batch_size; },
             whole_number(int64_t{0}))},
        {"conv-mode", Applies::kBoth,
         "A matrices of CROWN passes from convolutional feature maps: matrix (dense) or patches "
         "(auto_LiRPA's conv_mode; CROWN and alpha-CROWN passes, branch and bound's stay dense)",
         field([](RunOptions & r) -> auto& { return r.bound.conv_mode; })},
        {"dtype", Applies::kBoth, "floating-point type of the bounds and forward passes",
         field([](RunOptions & r) -> auto& { return r.dtype; })},
        {"device", Applies::kBoth, "where the bounds are computed",
         field([](RunOptions & r) -> auto& { return r.device; })},
        {"threads", Applies::kBoth, "intra-op (OpenMP) threads",
         field(
             [](RunOptions & r) -> auto& { return r.threads; }, CLI::Range(1, kMaxThreads))},
        {"timeout", Applies::kBoth,
         "seconds (0 = none); bounds: starts no new phase after it and fails",
         field(
             [](RunOptions & r) -> auto& { return r.verify.timeout_s; }, finite_number(false))},
        {"shard", Applies::kBoth,
         "sharding over the ranks (verify: over the ranks of each domain group): none, fsdp, tp "
         "(tensor parallel, IBP inside zones) or tp-exact (tensor parallel, CROWN inside zones)",
         field([](RunOptions & r) -> auto& { return r.shard; })},
        {"spec-parallel", Applies::kBoth,
         "split the rows of every backward pass across the ranks (verify: the domains of each "
         "ReLU-splitting batch across the ranks of a domain group)",
         field([](RunOptions & r) -> auto& { return r.spec_parallel; })},
        {"backend", Applies::kBoth, "auto (MPI under mpirun, NCCL with --device cuda)",
         field([](RunOptions & r) -> auto& { return r.backend; })},
        {"collective-timeout", Applies::kBoth,
         "seconds one collective may wait for the other ranks before the job ends with an error "
         "naming the ranks that did not arrive (0 = forever)",
         field(
             [](RunOptions & r) -> auto& { return r.collective_timeout_s; }, finite_number(false))},
    };
    const std::vector<OptionSpec> bab = bab_specs();
    s.insert(s.end(), bab.begin(), bab.end());
    s.insert(
        s.end(),
        {
            {"memory-limit", Applies::kBoth,
             "MB (10^6 bytes) of tensors to hold: alpha-CROWN bounds the intermediate nodes it "
             "reaches past half of it without alpha, and stops optimising past all of it; verify: "
             "each round of ReLU branch and bound shrinks its batch to fit, and the search ends "
             "unknown when not one domain fits (0 = half of the available memory: the host's, or "
             "the "
             "GPU's with --device cuda)",
             field(
                 [](RunOptions & r) -> auto& { return r.memory_limit_mb; },
                 CLI::Range(int64_t{0}, kMaxMemoryLimitMb))},
            {"max-rounds", Applies::kVerify, "stop branch and bound after N rounds (0 = no limit)",
             field(
                 [](RunOptions & r) -> auto& { return r.verify.bab.max_rounds; },
                 whole_number(int64_t{0}))},
            {"attack-restarts", Applies::kVerify,
             "random starting points of the PGD attack before branch and bound (besides the box "
             "centre), attacked in one batch",
             field(
                 [](RunOptions & r) -> auto& { return r.verify.bab.attack.restarts; },
                 whole_number(0))},
            {"attack-steps", Applies::kVerify, "PGD steps of that attack",
             field(
                 [](RunOptions & r) -> auto& { return r.verify.bab.attack.steps; },
                 whole_number(0))},
            {"seed", Applies::kVerify, "attack seed",
             field(
                 [](RunOptions & r) -> auto& { return r.verify.bab.attack.seed; },
                 whole_number(uint64_t{0}))},
            {"quiet", Applies::kVerify, "no progress lines on stderr",
             field([](RunOptions & r) -> auto& { return r.quiet; })},
        });
    return s;
  }();
  return specs;
}

const OptionSpec* find_spec(std::string_view name) {
  for (const OptionSpec& s : table()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool applies_to(Applies a, Command c) {
  return a == Applies::kBoth || (a == Applies::kBounds) == (c == Command::kBounds);
}

std::string only_text(Applies a) { return a == Applies::kBounds ? "bounds only" : "verify only"; }

}  // namespace

std::function<int()> add_command(CLI::App& app, Command command, const std::string& description,
                                 std::function<int(const RunOptions&)> run) {
  auto options = std::make_shared<RunOptions>();  // outlives parsing: the options bind to it
  CLI::App* cmd = app.add_subcommand(std::string(enum_name(command)), description);
  add_options(*cmd, *options);
  return [options, cmd, command, run = std::move(run)] {
    check_applies(*cmd, command);
    options->option_values = cmd->config_to_str(true, false);
    return run(*options);
  };
}

void add_options(CLI::App& cmd, RunOptions& run) {
  for (const OptionSpec& s : table()) {
    const std::string help = std::string(s.help) +
                             (s.applies == Applies::kBoth ? "" : " [" + only_text(s.applies) + "]");
    // `--json` is the name issue 14 gives the report; both names set the same option.
    const std::string alias = s.name == "report" ? ",--json" : "";
    s.bind(cmd, run, "--" + std::string(s.name) + alias, help);
  }
  // Read before parsing (expand_config); registered so that it is accepted and documented.
  cmd.add_option("--config", run.config,
                 "YAML file of options (keys: the long names without dashes); the command line "
                 "overrides it");
}

void check_applies(const CLI::App& cmd, Command command) {
  for (const OptionSpec& s : table()) {
    const std::string flag = "--" + std::string(s.name);
    if (!applies_to(s.applies, command) && cmd.get_option(flag)->count() > 0) {
      throw UsageError(flag + " applies to " + only_text(s.applies));
    }
  }
}

std::optional<Command> scan_command(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a.rfind('-', 0) == 0) continue;
    for (const auto& [c, name] : enum_table(Command{})) {
      if (a == name) return c;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::string scan_result(const std::vector<std::string>& args) {
  std::string result;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--result" && i + 1 < args.size()) result = args[i + 1];
    if (args[i].rfind("--result=", 0) == 0) result = args[i].substr(9);
  }
  return result;
}

std::vector<std::string> expand_config(const std::vector<std::string>& args) {
  const std::optional<Command> command = scan_command(args);
  if (!command) return args;
  size_t sub = 0;
  while (args[sub] != enum_name(*command)) ++sub;
  std::string path;
  for (size_t i = sub + 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (path.empty()) return args;

  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError("--config " + path + ": cannot open");
  } catch (const YAML::Exception& e) {
    throw UsageError("--config " + path + ": " + e.what());
  }
  std::vector<std::string> config_args;
  if (root.IsNull()) return args;  // an empty file sets nothing
  if (!root.IsMap()) throw UsageError("--config " + path + ": expected a map of options");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const OptionSpec* spec = find_spec(key);
    if (spec == nullptr) {
      throw UsageError("--config " + path + ": unknown key '" + key + "'");
    }
    if (!applies_to(spec->applies, *command)) {
      throw UsageError("--config " + path + ": " + key + " applies to " + only_text(spec->applies));
    }
    if (!kv.second.IsScalar()) {
      throw UsageError("--config " + path + ": " + key + ": expected a single value");
    }
    config_args.push_back("--" + key + "=" + kv.second.as<std::string>());
  }
  std::vector<std::string> out(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(sub) + 1);
  out.insert(out.end(), config_args.begin(), config_args.end());
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(sub) + 1, args.end());
  return out;
}

void require_usable_device(Device device) {
  if (device == Device::kCuda && (!at::hasCUDA() || at::getNumGPUs() == 0)) {
    throw UsageError("--device cuda: no CUDA device is usable here");
  }
}

}  // namespace distcrown::cli
