#pragma once
// The MPI and NCCL backends of the Communicator (library distcrown::mpi; the core library
// distcrown::distcrown has only the Local backend and does not link MPI).
#include "distcrown/collective/communicator.hpp"

namespace distcrown::collective {

/// MPI_COMM_WORLD (initializes MPI on first use, finalizes when the last MPI communicator is
/// destroyed). Throws distcrown::Error when MPI cannot be initialized.
CommPtr make_mpi_communicator();

/// NCCL over all MPI ranks, one GPU per rank (local rank modulo device count). Throws
/// distcrown::Error when built without NCCL or when no GPU is usable.
CommPtr make_nccl_communicator();

/// True when the library was built with NCCL support and a CUDA device is usable right now.
bool nccl_available();

/// For executables only (a library never exits): ends every rank of the job with `code` after
/// an error that the other ranks cannot learn of (MPI_Abort when MPI is up, else _Exit).
[[noreturn]] void abort_all_ranks(int code);

}  // namespace distcrown::collective
