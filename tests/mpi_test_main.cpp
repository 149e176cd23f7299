// GoogleTest main for multi-rank tests (tests/CMakeLists.txt: distcrown_mpi_test). Every rank runs
// every test and prints its own output; the exit code is the maximum over ranks, so a failure on
// any rank fails the ctest entry. Started without mpirun, MPI initializes as a singleton (P = 1).
#include <gtest/gtest.h>
#include <mpi.h>

#include "distcrown/collective/communicator.hpp"
#include "mpi_test_main.hpp"

namespace distcrown::testing {
bool launched_under_mpi_before_init = false;
}  // namespace distcrown::testing

int main(int argc, char** argv) {
  // Asked before MPI_Init: Open MPI's singleton initialization sets PMIX_RANK in the process
  // environment, after which launched_under_mpi() is true even without mpirun.
  distcrown::testing::launched_under_mpi_before_init = distcrown::collective::launched_under_mpi();
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int local_rc = RUN_ALL_TESTS();
  int rc = local_rc;
  if (MPI_Allreduce(&local_rc, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
