// Linked instead of mpi_communicator.cpp when kiln is built without MPI (KILN_MPI=OFF, or AUTO
// without an MPI installation).
#include "core/error.h"
#include "distributed/backends.h"
#include "distributed/bootstrap.h"

namespace kiln::dist {

std::unique_ptr<Communicator> make_mpi(const Launch& launch, Device, double) {
  fail(
      "dist: the MPI backend is not built into this kiln ({} ranks were launched); install "
      "libopenmpi-dev and reconfigure with -DKILN_MPI=ON",
      launch.world_size);
}

std::unique_ptr<Bootstrap> mpi_bootstrap(double, const std::function<std::string()>&) {
  fail(
      "dist: NCCL ranks launched by mpirun meet through MPI, which is not built into this kiln; "
      "install libopenmpi-dev and reconfigure with -DKILN_MPI=ON, or start the ranks with "
      "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
}

bool mpi_built() { return false; }

}  // namespace kiln::dist
