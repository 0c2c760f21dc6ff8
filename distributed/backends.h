// The backends' constructors, for make_communicator. A backend that is not built has a stand-in
// (no_mpi.cpp, no_nccl.cpp) that throws a kiln::Error saying how to build it.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace kiln::dist {

std::unique_ptr<Communicator> make_single_process(Device device, double timeout_s);
// Under mpirun (or a singleton MPI job).
std::unique_ptr<Communicator> make_mpi(const Launch& launch, Device device, double timeout_s);
// One GPU per rank, cuda:<local rank>; the ranks meet through MPI under mpirun, else over TCP
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
std::unique_ptr<Communicator> make_nccl(const Launch& launch, double timeout_s);

}  // namespace kiln::dist
