#include "cli/world.hpp"

#include "distcrown/collective/mpi.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {

namespace {

collective::CommPtr chosen_world(const std::string& backend, const std::string& device) {
  std::string chosen = backend;
  if (chosen == "auto") {
    if (!collective::launched_under_mpi()) {
      chosen = "local";
    } else {
      chosen = device == "cuda" ? "nccl" : "mpi";
    }
  }
  if (chosen == "local") {
    if (collective::launched_under_mpi()) {
      // Under mpirun, "local" would make every rank run alone and write the same outputs.
      auto probe = collective::make_mpi_communicator();
      if (probe->size() > 1) {
        throw InvalidArgument("--backend local under mpirun with " + std::to_string(probe->size()) +
                              " ranks; use mpi or nccl");
      }
      return probe;
    }
    return collective::make_local_communicator();
  }
  if (chosen == "mpi") return collective::make_mpi_communicator();
  if (chosen == "nccl") {
    if (device != "cuda") throw InvalidArgument("--backend nccl needs --device cuda");
    return collective::make_nccl_communicator();
  }
  throw InvalidArgument("unknown backend '" + backend + "' (auto, local, mpi, nccl)");
}

}  // namespace

collective::CommPtr make_world(const std::string& backend, const std::string& device,
                               double collective_timeout_s) {
  collective::CommPtr world = chosen_world(backend, device);
  world->set_collective_timeout(collective_timeout_s);
  return world;
}

}  // namespace distcrown::cli
