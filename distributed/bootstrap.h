// Bootstrap: how the ranks of a backend without a start-up of its own (NCCL) meet, and the
// control channel they keep for the watchdog. Under mpirun the ranks meet through MPI; with
// torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) over TCP.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/control.h"

namespace kiln::dist {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual ControlChannel& control() = 0;
  // Rank 0's payload (NCCL's unique id), the same on every rank.
  virtual const std::string& payload() const = 0;
  // A collective failed: make sure the whole job ends (MPI: MPI_Abort when this process exits).
  virtual void abort_job() = 0;
  // After a clean shutdown (every rank has left): release the channel.
  virtual void finish() = 0;
};

// The ranks meet through MPI (under mpirun); make_payload runs on rank 0 only. Throws kiln::Error
// when not every rank arrives within timeout_s, or MPI is not built (distributed/no_mpi.cpp).
std::unique_ptr<Bootstrap> mpi_bootstrap(double timeout_s,
                                         const std::function<std::string()>& make_payload);
// The ranks meet over TCP (distributed/tcp_mesh.h) from launch and $MASTER_ADDR, $MASTER_PORT.
std::unique_ptr<Bootstrap> tcp_bootstrap(const Launch& launch, double timeout_s,
                                         const std::function<std::string()>& make_payload);

}  // namespace kiln::dist
