// The communicator of the multi-rank tests (test_dist_ranks), one per process, made on first use
// and ended when the process exits. mpirun (or torchrun-style variables) starts the ranks;
// $KILN_TEST_DIST_BACKEND picks the backend: mpi (the default, host tensors) or nccl (tensors on
// the rank's GPU, scripts/multi_gpu_check.sh); $KILN_TEST_DIST_DEVICE=cuda puts an MPI job's
// tensors on the GPU (staged through the host).
#pragma once

#include "distributed/communicator.h"

namespace kiln::testing {

dist::Communicator& ranks_comm();

}  // namespace kiln::testing
