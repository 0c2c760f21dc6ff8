// MpiSession: this process's part in an MPI job, for the MPI backend and for NCCL ranks that meet
// through MPI. It initialises MPI unless the program did, duplicates MPI_COMM_WORLD (so kiln's
// traffic never meets the program's own), makes every MPI error a return code rather than an
// abort, and carries the watchdog's control channel on a tag of its own.
//
// A failed job is ended with MPI_Abort when the process exits (after the program has printed its
// error): mpirun then stops every rank, also one that hangs.
#pragma once

#include <list>
#include <optional>
#include <string>
#include <utility>

#include <mpi.h>

#include "distributed/control.h"

namespace kiln::dist {

// MPI's description of an error code.
std::string mpi_error_string(int code);

class MpiSession {
 public:
  // Throws kiln::Error when MPI cannot start or the ranks do not all arrive within timeout_s.
  explicit MpiSession(double timeout_s);
  // Frees the communicator and finalises MPI (if this session initialised it) after finish();
  // leaves MPI alone otherwise, since a failed job is being aborted.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  MPI_Comm comm() const { return comm_; }
  ControlChannel& control() { return control_; }

  // After a clean shutdown (every rank left): waits for the control messages still in flight.
  void finish();
  // Makes this process call MPI_Abort(MPI_COMM_WORLD, 1) when it exits.
  static void abort_at_exit();

 private:
  class Control final : public ControlChannel {
   public:
    void send(int peer, const ControlMessage& message) override;
    std::optional<ControlEvent> poll() override;
    bool sends_done();  // tests the pending sends, true when none is left
    MPI_Comm comm = MPI_COMM_NULL;

   private:
    std::list<std::pair<MPI_Request, ControlMessage>> sending_;  // stable addresses
  };

  double timeout_s_;
  bool owns_mpi_ = false;
  bool finished_ = false;
  int rank_ = 0, world_size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  Control control_;
};

}  // namespace kiln::dist
