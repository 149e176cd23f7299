#pragma once
// What tests/mpi_test_main.cpp saw before MPI_Init.

namespace distcrown::testing {
/// collective::launched_under_mpi() before MPI_Init (afterwards a singleton looks launched too).
extern bool launched_under_mpi_before_init;
}  // namespace distcrown::testing
