#include "distcrown/bab/bab.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "distcrown/util/memory.hpp"

namespace distcrown::bab {
namespace {

// Seconds between two progress lines of one phase.
constexpr double kProgressInterval = 1.0;

}  // namespace

std::string spec_parallel_refusal(const BabOptions& o, bool tensor_parallel) {
  if (tensor_parallel) return spec_parallel_tensor_parallel_refusal();
  if (o.intermediate != BabIntermediate::kRefresh) return {};
  return "spec-parallel branch and bound keeps the intermediate bounds fixed: "
         "--bab-intermediate refresh bounds each domain's own unstable neurons, which would give "
         "the ranks' shares different passes";
}

std::string cuts_refusal(const CutsSetting& s) {
  if (s.splits_inputs) {
    return "--cuts: cuts are made of ReLU splits, and this property's search splits the inputs "
           "(--split relu splits ReLUs)";
  }
  if (s.shared || s.tensor_parallel) {
    return "--cuts: cuts are kept by one process's search: not with --domain-groups > 1, "
           "--spec-parallel or tensor parallelism";
  }
  if (s.general_splits) {
    return "--cuts: cuts are made of ReLU splits: this network's search also splits general "
           "nonlinearities";
  }
  return {};
}

int64_t default_memory_limit_bytes(bool cuda) {
  if (cuda) return memory::cuda_free_bytes(-1) / 2;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    std::string unit;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB" && kib > 0) {
      return kib * 1024 / 2;
    }
  }
  return 0;
}

void Progress::start(std::string phase) {
  phase_ = std::move(phase);
  rounds_ = -1;
  print();
}

void Progress::report(int64_t rounds, int64_t bounded, int64_t queued, double worst) {
  rounds_ = rounds;
  bounded_ = bounded;
  queued_ = queued;
  worst_ = worst;
  beat();
}

void Progress::beat() {
  if (!enabled_ || (last_ >= 0 && deadline_.elapsed() - last_ < kProgressInterval)) return;
  print();
}

void Progress::print() {
  if (!enabled_) return;
  last_ = deadline_.elapsed();
  std::string line = "progress: " + phase_;
  char buf[160];
  std::snprintf(buf, sizeof buf, ", %.1f s", last_);
  line += buf;
  if (rounds_ >= 0) {
    std::snprintf(buf, sizeof buf,
                  ", round %lld, domains bounded %lld, in queue %lld, worst bound %.6g",
                  static_cast<long long>(rounds_), static_cast<long long>(bounded_),
                  static_cast<long long>(queued_), worst_);
    line += buf;
  }
  // Resident (what the OS gives the process) and the tensors' own peak (the accountant, or the
  // CUDA caching allocator where the bounds are computed on a GPU).
  std::snprintf(buf, sizeof buf, ", peak memory %.0f MB (%stensors %.0f MB)\n",
                double(peak_resident_bytes()) / 1e6, device_.is_cuda() ? "CUDA " : "",
                double(memory::usage(device_).peak_bytes) / 1e6);
  line += buf;
  std::fputs(line.c_str(), stderr);
}

}  // namespace distcrown::bab
