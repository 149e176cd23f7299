#include "cli/run_setup.hpp"

#include <optional>

#include "distcrown/bab/bab.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/sharding/sharded_param.hpp"

namespace distcrown::cli {

std::string run_fingerprint(const RunOptions& a, const ProblemInput& in) {
  return collective::fingerprint(in.model_bytes) + collective::fingerprint(in.property_text) +
         collective::fingerprint(a.option_values);
}

ProblemInput load_agreed(const RunOptions& a, collective::Communicator& world,
                         const std::function<void(const ProblemInput&)>& check,
                         std::optional<ReadProblem> read, bool may_peel_softmax) {
  std::optional<ProblemInput> loaded;
  collective::run_agreed(world, [&] {
    loaded.emplace(load_problem_input(a.model, a.vnnlib, std::move(read), may_peel_softmax));
    if (check) check(*loaded);
  });
  collective::check_same_inputs(world, run_fingerprint(a, *loaded));
  return std::move(*loaded);
}

Placement place(const RunOptions& a, BoundGraph& g, collective::Communicator& world,
                const collective::CommPtr& group, const std::function<void()>& then) {
  Placement out;
  collective::run_agreed(world, [&] {
    // Always: float64 ONNX models load with float64 parameters, and --dtype decides.
    g.to_dtype(a.dtype == Dtype::kFloat64 ? at::kDouble : at::kFloat);
    if (sharding::is_tensor_parallel(a.shard)) {
      out.tp_plan = sharding::describe(sharding::partition_tensor_parallel(g, group), g);
    } else {
      // FSDP shards the weights over `group` (sharding/sharded_param.hpp).
      sharding::shard_graph(g, a.shard, group);
    }
    out.param_bytes = g.param_bytes();
    if (a.device == Device::kCuda) g.to_device(at::Device(at::kCUDA));
    if (then) then();
  });
  return out;
}

int64_t memory_limit_bytes(const RunOptions& a) {
  return a.memory_limit_mb > 0 ? a.memory_limit_mb * 1000000
                               : bab::default_memory_limit_bytes(a.device == Device::kCuda);
}

}  // namespace distcrown::cli
