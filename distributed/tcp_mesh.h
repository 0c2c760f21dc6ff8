// TcpMesh: torchrun-style start-up over TCP, for NCCL ranks launched without mpirun (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT on every process), and the control channel those ranks
// keep afterwards.
//
// Rank 0 listens on MASTER_PORT; every other rank listens on a port of its own, connects to
// MASTER_ADDR:MASTER_PORT (retrying until rank 0 is up) and says who it is. Rank 0 checks that
// the ranks are distinct and agree on the world size, and sends everyone the table of addresses
// and its payload (NCCL's unique id). Then every pair of ranks connects, so that each rank has a
// connection to every other: a control message goes straight to its peer, and a peer whose
// process ends is seen at once, as its connection closes. IPv4 only; N (N - 1) / 2 connections.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "distributed/control.h"

namespace kiln::dist {

class TcpMesh final : public ControlChannel {
 public:
  // payload: rank 0's bytes for every rank (ignored on the others). Throws kiln::Error naming
  // the missing or inconsistent ranks when the mesh is not complete within timeout_s.
  TcpMesh(int rank, int world_size, const std::string& master_addr, int master_port,
          const std::string& payload, double timeout_s);
  ~TcpMesh() override;  // closes every connection (the peers see this rank leave)
  TcpMesh(const TcpMesh&) = delete;
  TcpMesh& operator=(const TcpMesh&) = delete;

  const std::string& payload() const { return payload_; }  // rank 0's payload, on every rank

  void send(int peer, const ControlMessage& message) override;
  std::optional<ControlEvent> poll() override;

 private:
  void rendezvous_as_root(int port, const std::string& payload);
  void rendezvous(const std::string& master_addr, int port);

  int rank_, world_size_;
  double timeout_s_;
  std::string who_;      // "tcp rank 1 of 3", for messages
  int listener_ = -1;    // this rank's listening socket during start-up
  std::vector<int> fd_;  // per peer: the connection (-1 for this rank, or once closed)
  std::string payload_;
};

}  // namespace kiln::dist
