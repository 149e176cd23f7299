#pragma once
// The set of processes a command runs on: a communicator chosen from --backend and --device.
#include <string>

#include "distcrown/collective/communicator.hpp"

namespace distcrown::cli {

/// backend: auto (MPI when launched by mpirun, NCCL instead when --device cuda, else local),
/// local, mpi or nccl; with `collective_timeout_s` as its collective timeout.
collective::CommPtr make_world(const std::string& backend, const std::string& device,
                               double collective_timeout_s);

}  // namespace distcrown::cli
