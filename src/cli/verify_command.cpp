// `distcrown verify`: decides a VNNLIB property (the VNN-COMP contract in README.md): the result
// (sat / unsat / timeout / unknown) on stdout and in --result, with the counterexample for sat;
// progress on stderr (a line per phase, then at most one a second), and a JSON summary in --report.
// The answer comes by --timeout counted from the process's start: the phases stop at the deadline
// (util/deadline.hpp), and a watchdog thread answers `timeout` if a single step outlasts it. On any
// failure main.cpp writes `error` to --result.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/problem_input.hpp"
#include "cli/run_setup.hpp"
#include "cli/world.hpp"
#include "distcrown/bab/enumeration.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/mpi.hpp"
#include "distcrown/io/point_model.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/deadline.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/output_file.hpp"

namespace distcrown::cli {
namespace {

// SIGINT and SIGTERM (what a competition harness sends at its deadline) end verify at once with
// the answer "timeout", on stdout and in --result. The handler uses async-signal-safe calls only,
// so the path waits in a fixed buffer, set before verify starts: the executable's one piece of
// process-wide state besides the memory accountant (a signal handler cannot be given any other).
std::array<char, 4096>
    g_signal_result_path{};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void answer_timeout_on_signal(int /*signal*/) {
  static constexpr char kText[] = "timeout\n";
  if (g_signal_result_path[0] != '\0') {
    const int fd =
        ::open(g_signal_result_path.data(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, kText, sizeof kText - 1);
      ::close(fd);
    }
  }
  (void)!::write(STDOUT_FILENO, kText, sizeof kText - 1);
  ::_exit(0);
}

extern "C" void end_silently_on_signal(int /*signal*/) { ::_exit(0); }

// Installs the handler for SIGINT and SIGTERM; a result path too long for the buffer is answered
// on stdout only. A rank that is not the speaker of its job (`speaker` false) ends without a word.
void answer_timeout_on_signals(const std::string& result, bool speaker) {
  if (!speaker) {
    struct sigaction quiet {};
    quiet.sa_handler = end_silently_on_signal;
    sigemptyset(&quiet.sa_mask);
    sigaction(SIGINT, &quiet, nullptr);
    sigaction(SIGTERM, &quiet, nullptr);
    return;
  }
  if (result.size() < g_signal_result_path.size()) {
    std::copy(result.begin(), result.end(), g_signal_result_path.begin());
    g_signal_result_path[result.size()] = '\0';
  }
  struct sigaction action {};
  action.sa_handler = answer_timeout_on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The real answer is written with the two signals blocked, so a late signal cannot replace it.
void write_result(const std::string& path, const std::string& text) {
  sigset_t deadline_signals;
  sigemptyset(&deadline_signals);
  sigaddset(&deadline_signals, SIGINT);
  sigaddset(&deadline_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &deadline_signals, nullptr);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!path.empty()) write_output_file(path, text);
}

// A rank's failure ends the job: the VNN-COMP contract still wants a result file.
void write_error_result(const std::string& path) {
  if (path.empty()) return;
  try {
    write_output_file(path, "error\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distcrown: error: %s\n", e.what());
  }
}

// The answer is out; what is left is LibTorch's static teardown (deregistering every operator,
// freeing its caches: 0.3 s measured on this VM), which a harness timing the command counts
// against the deadline. Skipped, except under AddressSanitizer, whose leak check runs at exit.
void end_after_answer() {
#if defined(__SANITIZE_ADDRESS__)
  return;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return;
#endif
#endif
  std::fflush(nullptr);
  std::_Exit(0);
}

// --report: the answer, the seconds since the process started and the peak memory (resident, as
// the OS counts it, and the tensors' own peak from the memory accountant). The watchdog writes
// this much; a decided run adds run_facts().
void write_report(const std::string& path, const std::string& verdict, double seconds,
                  const nlohmann::json& more = nlohmann::json::object()) {
  nlohmann::json j;
  j["result"] = verdict;
  j["time_s"] = seconds;
  j["memory"] = {{"peak_bytes", peak_resident_bytes()},
                 {"peak_tensor_bytes", memory::peak_bytes()}};
  for (const auto& [key, value] : more.items()) {
    if (key == "memory") {
      j["memory"].update(value);
    } else {
      j[key] = value;
    }
  }
  write_output_file(path, j.dump() + "\n");
}

// The tensors' peak where the bounds were computed: the accountant's on the CPU, the CUDA caching
// allocator's (this rank's current device) with --device cuda, where the accountant sees only the
// host side.
int64_t tensor_peak_bytes(const RunOptions& a) {
  return memory::usage(a.device == Device::kCuda ? at::Device(at::kCUDA) : at::Device(at::kCPU))
      .peak_bytes;
}

// The rounds' exchanges over the ranks (`exchange`: each rank's, in rank order): the messages
// (the same count on every rank), their bytes over all ranks, and the seconds inside them of the
// rank that spent the least and of the one that spent the most (waiting for slower groups
// included).
nlohmann::json exchange_facts(const std::vector<collective::CommStats>& exchange) {
  int64_t bytes = 0;
  double least = exchange.front().control_time_s;
  double most = least;
  for (const collective::CommStats& c : exchange) {
    bytes += c.control_bytes;
    least = std::min(least, c.control_time_s);
    most = std::max(most, c.control_time_s);
  }
  return {{"messages", exchange.front().control_calls},
          {"bytes", bytes},
          {"min_time_s", least},
          {"max_time_s", most}};
}

// Collective: what every rank did (peak memory, collectives), for rank 0's report, with the
// ranks' layout and the branch and bound's counts.
nlohmann::json run_facts(const RunOptions& a, collective::Communicator& world,
                         const collective::Communicator& group, const bab::VerifyResult& r,
                         int64_t memory_limit_bytes, int64_t param_bytes) {
  const collective::CommStats mine = group.stats();
  const std::string text =
      std::to_string(param_bytes) + " " + std::to_string(peak_resident_bytes()) + " " +
      std::to_string(tensor_peak_bytes(a)) + " " + std::to_string(mine.calls) + " " +
      std::to_string(mine.bytes) + " " + std::to_string(mine.time_s) + " " +
      std::to_string(r.exchange.control_calls) + " " + std::to_string(r.exchange.control_bytes) +
      " " + std::to_string(r.exchange.control_time_s);
  nlohmann::json ranks = nlohmann::json::array();
  int64_t peak = 0;
  int64_t peak_tensors = 0;
  collective::CommStats total;
  std::vector<collective::CommStats> exchange;  // every rank's round exchanges
  for (const std::string& t : world.all_gather_strings(text)) {
    std::istringstream in(t);
    int64_t params = 0;
    int64_t bytes = 0;
    int64_t tensors = 0;
    collective::CommStats c;
    in >> params >> bytes >> tensors >> c.calls >> c.bytes >> c.time_s >> c.control_calls >>
        c.control_bytes >> c.control_time_s;
    exchange.push_back(c);
    peak = std::max(peak, bytes);
    peak_tensors = std::max(peak_tensors, tensors);
    total.calls += c.calls;
    total.bytes += c.bytes;
    total.time_s = std::max(total.time_s, c.time_s);
    ranks.push_back({{"rank", ranks.size()},
                     {"peak_bytes", bytes},
                     {"peak_tensor_bytes", tensors},
                     {"param_bytes", params},
                     {"exchange_time_s", c.control_time_s}});
  }
  nlohmann::json j;
  j["world_size"] = world.size();
  j["groups"] = a.domain_groups;
  j["shard"] = std::string(enum_name(a.shard));
  j["spec_parallel"] = a.spec_parallel;
  j["domains_bounded"] = r.domains_bounded;
  j["domains_per_group"] = r.domains_per_group.empty()
                               ? std::vector<int64_t>(size_t(a.domain_groups), 0)
                               : r.domains_per_group;
  j["domains_moved"] = r.domains_moved;
  j["domains_moved_in_groups"] = r.domains_moved_in_groups;
  j["counterexample_group"] =
      r.counterexample_group ? nlohmann::json(*r.counterexample_group) : nlohmann::json();
  j["bab_time_s"] = r.bab_seconds;
  j["bab_attack_time_s"] = r.bab_attack_seconds;
  // Which passes branch and bound's rounds ran, and the FLOPs of the planned ones' products.
  j["bab_passes"] = r.bab_searches == 0 ? nlohmann::json()
                    : r.bab_planned     ? nlohmann::json("planned")
                                        : nlohmann::json("reference");
  j["bab_pass_flops"] = r.bab_pass_flops;
  j["cuts"] = {{"checked", r.cuts.checked},
               {"learned", r.cuts.learned},
               {"pruned", r.cuts.pruned},
               {"implied", r.cuts.implied}};
  j["bab_rounds"] = r.bab_rounds;
  j["exchange"] = exchange_facts(exchange);
  j["worst_bound"] = r.worst_bound ? nlohmann::json(*r.worst_bound) : nlohmann::json();
  // The smallest batch of a ReLU-splitting round (null: none ran), and this rank's memory limit
  // (null: none) and whether it shrank a batch or ended the search.
  j["bab_min_batch"] = r.bab_min_batch > 0 ? nlohmann::json(r.bab_min_batch) : nlohmann::json();
  j["memory"] = {{"peak_bytes", peak},
                 {"peak_tensor_bytes", peak_tensors},
                 {"ranks", ranks},
                 {"limit_bytes",
                  memory_limit_bytes > 0 ? nlohmann::json(memory_limit_bytes) : nlohmann::json()},
                 {"limited", r.memory_limited}};
  // Collectives of the model's sharding within the groups, summed over the ranks (the round
  // exchanges are host messages, not counted).
  j["comm"] = {{"calls", total.calls}, {"bytes", total.bytes}, {"time_s", total.time_s}};
  return j;
}

// Seconds past the (internal) deadline after which the watchdog answers. The phases check the
// deadline between steps of a few milliseconds to a few hundred; this fires only when one step (a
// single large tensor operation, an autograd backward) outlasts it.
constexpr double kWatchdogGraceSeconds = 0.25;

// Answers `timeout` when the main thread has not claimed the answer by the deadline plus the
// grace: writes --report, then sends SIGTERM to the process, whose handler writes `timeout` to
// stdout and --result and ends it (one writer of the answer, whichever way the time ran out).
class Watchdog {
 public:
  Watchdog(const Deadline& deadline, std::string report)
      : deadline_(deadline), report_(std::move(report)), thread_([this] { run(); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  Watchdog(Watchdog&&) = delete;
  Watchdog& operator=(Watchdog&&) = delete;
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  /// The main thread's claim on the answer: false once the watchdog has answered (the process
  /// is then ending).
  bool claim() {
    const std::lock_guard<std::mutex> lock(m_);
    if (answered_) return false;
    claimed_ = true;
    cv_.notify_all();
    return true;
  }

 private:
  void run() {
    // The signals go to the other threads: the handler must not run here, nor while the main
    // thread writes its answer (it blocks them there).
    sigset_t deadline_signals;
    sigemptyset(&deadline_signals);
    sigaddset(&deadline_signals, SIGINT);
    sigaddset(&deadline_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &deadline_signals, nullptr);
    std::unique_lock<std::mutex> lock(m_);
    const auto at =
        *deadline_.stop_at() + std::chrono::duration_cast<Deadline::Clock::duration>(
                                   std::chrono::duration<double>(kWatchdogGraceSeconds));
    if (cv_.wait_until(lock, at, [this] { return stop_ || claimed_; })) return;
    answered_ = true;
    lock.unlock();
    std::fprintf(stderr, "verify: timeout in %.2f s (a step outlasted the deadline; watchdog)\n",
                 deadline_.elapsed());
    if (!report_.empty()) {
      try {
        write_report(report_, "timeout", deadline_.elapsed());
      } catch (const Error& e) {
        std::fprintf(stderr, "distcrown: error: %s\n", e.what());
      }
    }
    ::kill(::getpid(), SIGTERM);
  }

  Deadline deadline_;
  std::string report_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool claimed_ = false;
  bool answered_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Claims the answer from the watchdog (or waits for its signal to end the process), then the
// speaker prints the summary line and writes the result and --report.
void answer(const RunOptions& a, const Deadline& deadline, std::optional<Watchdog>& watchdog,
            bool speaker, const bab::VerifyResult& r, const io::VnnlibProperty& property,
            const nlohmann::json& facts) {
  if (watchdog && !watchdog->claim()) {
    for (;;) ::pause();  // the watchdog has answered; its signal ends the process
  }
  watchdog.reset();
  if (!speaker) return;
  std::fprintf(stderr, "verify: %s in %.2f s (%s; %lld domains bounded; peak memory %.0f MB)\n",
               bab::to_string(r.verdict).c_str(), r.seconds, r.detail.c_str(),
               static_cast<long long>(r.domains_bounded), double(peak_resident_bytes()) / 1e6);
  write_result(a.result, bab::format_result(r, property));
  if (!a.report.empty()) {
    write_report(a.report, bab::to_string(r.verdict), deadline.elapsed(), facts);
  }
}

// One process, a property whose free inputs the model reads only as integers: decided by
// enumeration (bab/enumeration.hpp) before any graph is built, since such models (inputs used
// as positions) often cannot be lowered for bounds at all. Empty when it does not apply.
std::optional<bab::VerifyResult> enumerated(const ProblemFiles& files,
                                            const io::VnnlibProperty& property, const Deadline& d) {
  if (!bab::may_enumerate(property)) return std::nullopt;
  const io::PointModel model(files.model_bytes, files.model_name);
  if (!bab::enumeration_refusal(model, property).empty()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  bab::VerifyResult r = bab::decide_by_enumeration(model, property, d);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// A counterexample of a problem whose output Softmax was left out (io::Problem) holds the
// logits: its outputs become the model's, softmax(z) in the graph's dtype, and are checked
// against the property as written; where they do not violate it (a rounding tie the order
// could not keep) the answer is unknown, never a sat the model's own outputs contradict.
void restore_softmax_outputs(bab::VerifyResult& r, const io::Problem& p) {
  if (!r.counterexample) return;
  bab::Counterexample& cex = *r.counterexample;
  cex.y = io::softmax_outputs(cex.y, p.graph.dtype());
  if (bab::violated_at(p.property, cex.x, cex.y)) return;
  r.verdict = bab::Verdict::kUnknown;
  r.detail = "the logits violate the property, the softmax outputs do not (rounding)";
  r.counterexample.reset();
}

// Seconds before --timeout at which the phases stop: what is left goes to unwinding the phase
// (freeing its tensors and autograd graph), writing the answer and ending the process, which took
// 0.1-0.3 s on this 2-core VM under load with a 1.3 GB process.
constexpr double kAnswerMarginSeconds = 0.15;

int run_verify(const RunOptions& a) {
  // The harness times the whole command: the deadline counts from the process's start, and the
  // phases stop a margin before it (at half of it for very short timeouts).
  const double t = a.verify.timeout_s;
  const Deadline deadline =
      Deadline::since_process_start(t > 0 ? std::max(t - kAnswerMarginSeconds, t / 2) : 0);
  require_usable_device(a.device);
  const collective::CommPtr world = make_world(
      std::string(enum_name(a.backend)), std::string(enum_name(a.device)), a.collective_timeout_s);
  const bool speaker = world->rank() == 0;  // writes the answer, the report and the progress
  // Only the speaker answers a signal with `timeout`; the other ranks end silently.
  answer_timeout_on_signals(speaker ? a.result : std::string(), speaker);
  std::optional<Watchdog> watchdog;
  if (deadline.stop_at()) watchdog.emplace(deadline, speaker ? a.report : std::string());
  c10::NoGradGuard no_grad;
  // Branch and bound runs many small operations; on this class of machine OpenMP's threads
  // cost more than they give there (rounds measured 4-200x slower with 2 threads than 1).
  at::set_num_threads(a.threads);
  bab::VerifyOptions o = a.verify;
  // Every option that the layout refuses is refused here, on every rank, before anything is
  // sharded (bab::verify_refusal: each refusal written once; verify() asks it again).
  o.bab.spec_parallel = a.spec_parallel;
  std::optional<ReadProblem> read;  // read and parsed once, for enumeration and the load
  if (world->size() == 1) {
    read = read_problem(a.model, a.vnnlib);
    if (auto r = enumerated(read->files, read->property, deadline)) {
      answer(a, deadline, watchdog, speaker, *r, read->property, {{"split", "enumeration"}});
      end_after_answer();
      return 0;
    }
  }
  ProblemInput in = load_agreed(
      a, *world,
      [&](const ProblemInput& loaded) {
        const bab::RunLayout layout{world->size(), a.domain_groups,
                                    sharding::is_tensor_parallel(a.shard)};
        if (std::string why =
                bab::verify_refusal(o, layout, loaded.problem.graph, loaded.problem.property);
            !why.empty()) {
          throw InvalidArgument("verify: " + why);
        }
      },
      std::move(read), /*may_peel_softmax=*/true);
  const int group_size = world->size() / a.domain_groups;
  // One group is the world; a group of one rank needs no communication (and NCCL cannot split).
  collective::CommPtr group = world;
  if (a.domain_groups > 1) {
    group = group_size == 1 ? collective::make_local_communicator()
                            : world->split(world->rank() / group_size);
  }
  bab::RunContext context;
  context.deadline = deadline;
  context.world = {world, group, a.domain_groups};
  // --iterations and --lr are α-CROWN's, here the root's.
  o.bab.root_iterations = a.alpha.iterations;
  o.bab.root_lr = a.alpha.lr;
  o.bab.progress = !a.quiet && speaker;
  // --memory-limit: resolved here (the default from this rank's available memory, host or
  // GPU) so that the report gives the limit kept to.
  context.memory_limit_bytes = memory_limit_bytes(a);
  o.bab.bound.crown_batch_size = a.bound.crown_batch_size;
  o.bab.bound.conv_mode = a.bound.conv_mode;
  // --shard tp keeps the IBP bounds of tensor-parallel neurons (the reference work's scheme).
  if (a.shard == sharding::ShardPlan::kTp) {
    o.bab.bound.sharded_intermediate = ShardedIntermediate::kIbp;
  }
  // Input splitting bounds many small boxes of a small network: CROWN intersected with IBP
  // tightens every box; on the neurons IBP leaves unstable only (each box its own), since deep
  // in the search most are stable, and their CROWN rows would only tighten the IBP chain
  // (docs/archive/results-2026.md, "Input splitting: rows for the unstable neurons only").
  const bool inputs_split = bab::splits_inputs(o, in.problem.graph, in.problem.property);
  o.bab.bound.scheme = scheme_of(a.intermediate, inputs_split ? IntermediateScheme::kTightUnstable
                                                              : IntermediateScheme::kAutoLirpa);
  // Sharded over the ranks of each domain group (cli/run_setup.hpp). This rank's resident
  // weights between uses (FSDP: its shards; the report shows weights ÷ P).
  const int64_t param_bytes = place(a, in.problem.graph, *world, context.world.group).param_bytes;
  context.world.group->reset_stats();
  // A search that timed out leaves its open domains here, freed after the answer (or never:
  // end_after_answer).
  bab::Leftovers leftovers;
  context.leftovers = &leftovers;
  bab::VerifyResult r;
  try {
    r = bab::verify(o, context, in.problem.graph, in.problem.property);
  } catch (const std::exception& e) {
    if (world->size() == 1) throw;
    // The other ranks may be waiting in a collective: end them all.
    std::fprintf(stderr, "distcrown: error: rank %d: %s\n", world->rank(), e.what());
    if (speaker) write_error_result(a.result);
    collective::abort_all_ranks(1);
  }
  if (in.problem.output_softmax_peeled) restore_softmax_outputs(r, in.problem);
  nlohmann::json facts = run_facts(a, *world, *context.world.group, r, context.memory_limit_bytes,
                                   param_bytes);  // collective
  facts["split"] = inputs_split ? "input" : "relu";
  facts["output_softmax_peeled"] = in.problem.output_softmax_peeled;
  facts["intermediate"] = std::string(enum_name(o.bab.bound.scheme));
  answer(a, deadline, watchdog, speaker, r, in.problem.property, facts);
  if (world->backend() != "local") {
    world->barrier();  // no rank leaves (ending MPI) while another still writes
    return 0;          // MPI is finalised on the way out (mpirun counts _Exit as a failure)
  }
  end_after_answer();
  return 0;
}

}  // namespace

Action add_verify_command(CLI::App& app) {
  return add_command(
      app, Command::kVerify,
      "Decide a VNNLIB property: sat (with a counterexample), unsat, timeout or unknown",
      run_verify);
}

}  // namespace distcrown::cli
