// The NCCL backend: one GPU per rank (cuda:<local rank>), collectives on the CUDA backend's stream
// of that device, so they queue behind the kernels that produced their input. The ranks meet
// through MPI under mpirun, or over TCP from the torchrun-style variables
// (distributed/bootstrap.h), which hand out rank 0's ncclUniqueId; that channel stays open as the
// watchdog's control channel. The communicator is non-blocking (ncclConfig_t::blocking = 0): every
// NCCL call and every kernel is waited for under the watchdog, so a missing rank is a timeout that
// names it, never a hang, and a failure aborts the NCCL communicator.
//
// A float sum in rank order is the scheme of distributed/rank_order.h: grouped ncclSend/ncclRecv
// give rank r share r of every rank's buffer, the CUDA backend's add sums them in rank order, and
// grouped sends and receives gather the summed shares.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/storage.h"
#include "distributed/backends.h"
#include "distributed/bootstrap.h"
#include "distributed/rank_order.h"
#include "distributed/watchdog.h"

namespace kiln::dist {

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i64:
      return ncclInt64;
    case DType::bf16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Bootstrap> meeting, int gpu, double timeout_s)
      : Communicator("nccl", meeting->rank(), meeting->world_size(), gpu, Device::cuda(gpu),
                     Device::cuda(gpu), timeout_s),
        meeting_(std::move(meeting)),
        gpu_(gpu),
        stream_(cuda_backend_at(gpu).stream()),
        watchdog_(describe(), rank(), world_size(), timeout_s, meeting_->control(),
                  [this] { abort(); }) {
    KILN_CUDA_CHECK(cudaSetDevice(gpu_));
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    watchdog_.begin(Activity::setup);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclUniqueId id{};
    KILN_CHECK(meeting_->payload().size() == sizeof id,
               "{}: setup: rank 0 sent {} bytes, not an ncclUniqueId", describe(),
               meeting_->payload().size());
    std::memcpy(&id, meeting_->payload().data(), sizeof id);
    nccl(ncclCommInitRankConfig(&comm_, world_size(), id, rank(), &config),
         "ncclCommInitRankConfig");
    watchdog_.end();
  }

  ~NcclCommunicator() override {
    if (!watchdog_.failed()) {
      if (std::uncaught_exceptions() > 0) {
        watchdog_.mark_failed();  // aborts NCCL (and, under mpirun, the job at exit)
      } else {
        try {
          watchdog_.leave();
          watchdog_.begin(Activity::shutdown);
          nccl(ncclCommFinalize(comm_), "ncclCommFinalize");
          ncclCommDestroy(comm_);
          comm_ = nullptr;
          meeting_->finish();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s\n", e.what());  // a destructor cannot throw
        }
      }
    }
    cudaEventDestroy(done_);
  }

  void barrier() override {
    if (world_size() == 1) return;
    watchdog_.begin(Activity::barrier);
    if (!token_) token_ = std::make_unique<Storage>(sizeof(float), device());
    nccl(ncclAllReduce(token_->data(), token_->data(), 1, ncclFloat32, ncclSum, comm_, stream_),
         "ncclAllReduce");
    finish();
  }

 protected:
  void allreduce_native(const Buffer& b, ReduceOp op, SumOrder order) override {
    watchdog_.begin(Activity::allreduce);
    if (op == ReduceOp::sum && order == SumOrder::rank)
      sum_in_rank_order(b);
    else
      nccl(ncclAllReduce(b.data, b.data, static_cast<std::size_t>(b.count), nccl_type(b.dtype),
                         nccl_op(op), comm_, stream_),
           "ncclAllReduce");
    finish();
  }

  void broadcast_native(const Buffer& b, int root) override {
    watchdog_.begin(Activity::broadcast);
    nccl(ncclBroadcast(b.data, b.data, static_cast<std::size_t>(b.count), nccl_type(b.dtype), root,
                       comm_, stream_),
         "ncclBroadcast");
    finish();
  }

  void allgather_native(const Buffer& in, const Buffer& out) override {
    watchdog_.begin(Activity::allgather);
    nccl(ncclAllGather(in.data, out.data, static_cast<std::size_t>(in.count), nccl_type(in.dtype),
                       comm_, stream_),
         "ncclAllGather");
    finish();
  }

 private:
  // Checks an NCCL call; a call that is still in progress (non-blocking) is waited for.
  void nccl(ncclResult_t result, const char* what) {
    if (result == ncclInProgress) {
      watchdog_.wait([&] {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm_, &state);
        if (state == ncclInProgress) return false;
        check(state, what);
        return true;
      });
      return;
    }
    check(result, what);
  }

  void check(ncclResult_t result, const char* what) {
    if (result != ncclSuccess)
      watchdog_.fail(fmt::format("{} failed: {} ({})", what, ncclGetErrorString(result),
                                 ncclGetLastError(comm_)));
  }

  // Waits, under the watchdog, for everything queued on the stream; then the collective is done.
  void finish() {
    KILN_CUDA_CHECK(cudaEventRecord(done_, stream_));
    watchdog_.wait([&] {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclInProgress) check(state, "the NCCL communicator");
      const cudaError_t e = cudaEventQuery(done_);
      if (e == cudaErrorNotReady) return false;
      KILN_CUDA_CHECK(e);
      return true;
    });
    watchdog_.end();
  }

  void sum_in_rank_order(const Buffer& b) {
    const int world = world_size();
    const Share mine = share_of(b.count, world, rank());
    const std::size_t element = dtype_size(b.dtype);
    const std::size_t slot_bytes = static_cast<std::size_t>(mine.count) * element;
    if (!scratch_ || scratch_->nbytes() < slot_bytes * static_cast<std::size_t>(world))
      scratch_ = std::make_unique<Storage>(slot_bytes * static_cast<std::size_t>(world), device());
    auto* slots = static_cast<char*>(scratch_->data());
    auto* data = static_cast<char*>(b.data);
    const ncclDataType_t type = nccl_type(b.dtype);
    std::vector<const void*> parts(static_cast<std::size_t>(world));
    // Share p of this buffer to rank p; rank p's copy of share `mine` into slot p. Empty shares
    // (fewer elements than ranks) are skipped on both sides alike.
    nccl(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world; ++p) {
      const Share s = share_of(b.count, world, p);
      parts[static_cast<std::size_t>(p)] = slots + static_cast<std::size_t>(p) * slot_bytes;
      if (s.count > 0)
        nccl(ncclSend(data + s.offset * static_cast<std::int64_t>(element),
                      static_cast<std::size_t>(s.count), type, p, comm_, stream_),
             "ncclSend");
      if (mine.count > 0)
        nccl(ncclRecv(slots + static_cast<std::size_t>(p) * slot_bytes,
                      static_cast<std::size_t>(mine.count), type, p, comm_, stream_),
             "ncclRecv");
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd");
    dist::sum_in_rank_order(b.dtype, device(), mine.count, parts, slots);
    nccl(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world; ++p) {
      const Share s = share_of(b.count, world, p);
      if (mine.count > 0)
        nccl(ncclSend(slots, static_cast<std::size_t>(mine.count), type, p, comm_, stream_),
             "ncclSend");
      if (s.count > 0)
        nccl(ncclRecv(data + s.offset * static_cast<std::int64_t>(element),
                      static_cast<std::size_t>(s.count), type, p, comm_, stream_),
             "ncclRecv");
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  void abort() {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    meeting_->abort_job();
  }

  std::unique_ptr<Bootstrap> meeting_;
  int gpu_;
  cudaStream_t stream_;
  Watchdog watchdog_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  std::unique_ptr<Storage> scratch_;  // the slots of sum_in_rank_order, kept between calls
  std::unique_ptr<Storage> token_;    // the barrier's one float
};

}  // namespace

std::unique_ptr<Communicator> make_nccl(const Launch& launch, double timeout_s) {
  const int gpus = cuda_device_count();
  KILN_CHECK(launch.local_rank < gpus,
             "nccl: local rank {} needs GPU cuda:{} but this host has {} (NCCL takes one GPU per "
             "rank: start at most {} ranks per host)",
             launch.local_rank, launch.local_rank, gpus, gpus);
  const auto unique_id = [] {
    ncclUniqueId id{};
    const ncclResult_t result = ncclGetUniqueId(&id);
    KILN_CHECK(result == ncclSuccess, "nccl: ncclGetUniqueId failed: {}",
               ncclGetErrorString(result));
    return std::string(reinterpret_cast<const char*>(&id), sizeof id);
  };
  std::unique_ptr<Bootstrap> meeting = launch.kind == Launch::Kind::mpirun
                                           ? mpi_bootstrap(timeout_s, unique_id)
                                           : tcp_bootstrap(launch, timeout_s, unique_id);
  return std::make_unique<NcclCommunicator>(std::move(meeting), launch.local_rank, timeout_s);
}

bool nccl_built() { return true; }

}  // namespace kiln::dist
