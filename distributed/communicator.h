// Communicator: the ranks of a data-parallel job and the collectives they run together.
//
// A job is world_size() copies of one program, started by a launcher (mpirun, or torchrun-style
// environment variables); each copy is one rank, 0 .. world_size() - 1. Every rank calls the same
// collectives in the same order with buffers of the same shape and dtype:
//
//   auto comm = dist::make_communicator({.device = device});  // single, MPI or NCCL
//   comm->broadcast(weights, 0);                   // every rank gets rank 0's values
//   comm->allreduce(grad);                         // grad = Σ over ranks, summed in rank order
//   Tensor all = comm->allgather(x);               // (world_size, *x.shape)
//   comm->check_same("config", config_json);       // a clear error if the ranks disagree
//
// Backends: "single" (one process, no dependency, the default), "mpi" (Open MPI, host memory;
// started by mpirun) and "nccl" (one GPU per rank; the ranks meet through MPI under mpirun, or
// over TCP from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT). Tensors on another device than
// device() are copied there and back around each collective.
//
// Determinism. A float sum with SumOrder::rank is ((x_0 + x_1) + x_2) + ... in rank order, on
// every rank, whatever algorithm MPI or NCCL would choose: each rank sums its share of the
// elements in that order (Backend::binary add, the kernel autograd accumulates .grad with) and the
// shares are gathered. So N ranks that each contribute a micro-batch's gradient reproduce, bit for
// bit, one process accumulating the same N micro-batches in order (docs/distributed.md).
//
// Faults. Every collective must complete within timeout_s() of this rank entering it; a rank that
// ends early is seen at once. Either way the collective throws a kiln::Error naming the rank at
// fault (a roll call among the ranks finds who did not join), and the job is brought down when
// this process exits (MPI_Abort under mpirun), so no rank is left hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln::dist {

enum class ReduceOp : std::uint8_t { sum, max, min };

// The order of a floating-point sum (max, min and integer sums are exact in any order).
enum class SumOrder : std::uint8_t {
  rank,     // ((x_0 + x_1) + x_2) + ...: the same bits for every algorithm, world and library
  library,  // MPI_Allreduce / ncclAllReduce's own order: faster at scale, bits may differ
};

// Contiguous memory for a collective: count elements of dtype on device.
struct Buffer {
  void* data = nullptr;
  std::int64_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }         // rank among the processes of this host
  std::string_view backend() const { return backend_; }  // "single", "mpi" or "nccl"
  Device device() const { return device_; }              // where this rank's tensors should live
  double timeout_s() const { return timeout_s_; }
  // "mpi rank 1 of 3" (for messages and logs).
  std::string describe() const;

  // ---- Tensors: contiguous, the same shape and dtype on every rank, on any device.
  // In place: t becomes op over every rank's t.
  void allreduce(const Tensor& t, ReduceOp op = ReduceOp::sum, SumOrder order = SumOrder::rank);
  // In place: t becomes root's t.
  void broadcast(const Tensor& t, int root);
  // (world_size, *t.shape): row r is rank r's t, on t's device.
  Tensor allgather(const Tensor& t);

  // ---- Host values
  void allreduce(std::span<float> values, ReduceOp op = ReduceOp::sum,
                 SumOrder order = SumOrder::rank);
  void allreduce(std::span<double> values, ReduceOp op = ReduceOp::sum,
                 SumOrder order = SumOrder::rank);
  void allreduce(std::span<std::int64_t> values, ReduceOp op = ReduceOp::sum);
  void broadcast(std::span<std::byte> bytes, int root);
  // Every rank's text, in rank order (texts may differ in length).
  std::vector<std::string> allgather(std::string_view text);
  // A kiln::Error unless every rank passes the same text: it names the first rank that differs
  // and the first line where it differs from rank 0's, then the remedy ("config differs between
  // ranks: rank 2 has 'lr 0.002' where rank 0 has 'lr 0.001' (line 4); every rank must run the
  // same binary with the same flags"). Give one setting per line, so the line names it.
  void check_same(std::string_view what, std::string_view text,
                  std::string_view remedy =
                      "every rank must run the same binary with the same "
                      "flags");

  // Returns once every rank has called it.
  virtual void barrier() = 0;

  // ---- Raw buffers (what the overloads above come down to)
  void allreduce(const Buffer& buffer, ReduceOp op = ReduceOp::sum,
                 SumOrder order = SumOrder::rank);
  void broadcast(const Buffer& buffer, int root);
  void allgather(const Buffer& in, const Buffer& out);  // out holds world_size × in.count

 protected:
  // native_device: where the backend's collectives work (the host for MPI, the GPU for NCCL).
  Communicator(std::string backend, int rank, int world_size, int local_rank, Device device,
               Device native_device, double timeout_s);

  // A backend's collectives over contiguous memory on the native device, at most 2^28 elements
  // (checked, staged and cut into pieces by the base; never called with world_size 1). A float
  // sum in SumOrder::rank must give the bits of ((x_0 + x_1) + ...) (distributed/rank_order.h).
  virtual void allreduce_native(const Buffer& buffer, ReduceOp op, SumOrder order) = 0;
  virtual void broadcast_native(const Buffer& buffer, int root) = 0;
  virtual void allgather_native(const Buffer& in, const Buffer& out) = 0;

 private:
  class Staged;
  void check_root(int root, const char* op) const;

  std::string backend_;
  int rank_, world_size_, local_rank_;
  Device device_, native_device_;
  double timeout_s_;
};

// How this process was started: by mpirun (Open MPI's or MPICH's variables), torchrun-style
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or alone.
struct Launch {
  enum class Kind : std::uint8_t { single, mpirun, torchrun };
  Kind kind = Kind::single;
  int rank = 0, world_size = 1, local_rank = 0;
};
// Reads the launcher's variables; malformed values are a kiln::Error naming the variable.
Launch detect_launch();

// The default collective timeout: $KILN_DIST_TIMEOUT (seconds) if set, else 300 s.
double default_timeout_s();

struct Options {
  // "auto": nccl for a CUDA device in a multi-rank job, mpi under mpirun otherwise, single alone;
  // or "single", "mpi", "nccl" to insist on one (a clear error when it is not built or cannot
  // start).
  std::string backend = "auto";
  // The training device. single and mpi keep it (mpi stages CUDA tensors through the host); nccl
  // uses cuda:<local rank>, one GPU per rank.
  Device device = Device::cpu();
  double timeout_s = 0;  // 0: default_timeout_s()
};

// The communicator of this process's launch.
std::unique_ptr<Communicator> make_communicator(const Options& options = {});

// Whether kiln was built with each backend (KILN_MPI, and NCCL with KILN_CUDA).
bool mpi_built();
bool nccl_built();

}  // namespace kiln::dist
