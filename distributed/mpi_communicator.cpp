// The MPI backend: collectives on host memory through Open MPI's non-blocking collectives, each
// waited for under the watchdog (distributed/watchdog.h). A float sum in rank order is an
// all-to-all of shares, an in-order sum of each rank's share, and an allgather
// (distributed/rank_order.h); everything else is exact in any order and uses MPI's own collective.
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/storage.h"
#include "distributed/backends.h"
#include "distributed/mpi_session.h"
#include "distributed/rank_order.h"
#include "distributed/watchdog.h"

namespace kiln::dist {

namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::bf16:  // MPI has no bfloat16; broadcast and allgather move it as 16-bit words
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::unique_ptr<MpiSession> session, int local_rank, Device device,
                  double timeout_s)
      : Communicator("mpi", session->rank(), session->world_size(), local_rank, device,
                     Device::cpu(), timeout_s),
        session_(std::move(session)),
        watchdog_(describe(), rank(), world_size(), timeout_s, session_->control(),
                  &MpiSession::abort_at_exit) {}

  ~MpiCommunicator() override {
    if (watchdog_.failed()) return;
    if (std::uncaught_exceptions() > 0) {
      // This rank is ending with an error: its message says why; MPI_Abort at exit stops the
      // ranks that wait for it.
      watchdog_.mark_failed();
      return;
    }
    try {
      watchdog_.leave();
      session_->finish();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());  // a destructor cannot throw; the job aborts
    }
  }

  void barrier() override {
    if (world_size() == 1) return;
    watchdog_.begin(Activity::barrier);
    MPI_Request request = MPI_REQUEST_NULL;
    call(MPI_Ibarrier(session_->comm(), &request), "MPI_Ibarrier");
    wait(request);
    watchdog_.end();
  }

 protected:
  void allreduce_native(const Buffer& b, ReduceOp op, SumOrder order) override {
    watchdog_.begin(Activity::allreduce);
    if (op == ReduceOp::sum && order == SumOrder::rank)
      sum_in_rank_order(b);
    else
      library_allreduce(b, op);
    watchdog_.end();
  }

  void broadcast_native(const Buffer& b, int root) override {
    watchdog_.begin(Activity::broadcast);
    MPI_Request request = MPI_REQUEST_NULL;
    call(MPI_Ibcast(b.data, static_cast<int>(b.count), mpi_type(b.dtype), root, session_->comm(),
                    &request),
         "MPI_Ibcast");
    wait(request);
    watchdog_.end();
  }

  void allgather_native(const Buffer& in, const Buffer& out) override {
    watchdog_.begin(Activity::allgather);
    MPI_Request request = MPI_REQUEST_NULL;
    const MPI_Datatype type = mpi_type(in.dtype);
    call(MPI_Iallgather(in.data, static_cast<int>(in.count), type, out.data,
                        static_cast<int>(in.count), type, session_->comm(), &request),
         "MPI_Iallgather");
    wait(request);
    watchdog_.end();
  }

 private:
  void call(int code, const char* what) {
    if (code != MPI_SUCCESS)
      watchdog_.fail(fmt::format("{} failed: {}", what, mpi_error_string(code)));
  }

  void wait(MPI_Request& request) {
    watchdog_.wait([&] {
      int done = 0;
      call(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      return done != 0;
    });
  }

  void library_allreduce(const Buffer& b, ReduceOp op) {
    MPI_Request request = MPI_REQUEST_NULL;
    call(MPI_Iallreduce(MPI_IN_PLACE, b.data, static_cast<int>(b.count), mpi_type(b.dtype),
                        mpi_op(op), session_->comm(), &request),
         "MPI_Iallreduce");
    wait(request);
  }

  // Rank r receives share r of every rank's buffer (slot p holds rank p's), sums the slots in
  // rank order into slot 0, and the summed shares are gathered into every rank's buffer.
  void sum_in_rank_order(const Buffer& b) {
    const int world = world_size();
    std::vector<int> counts(static_cast<std::size_t>(world)), offsets(counts.size());
    for (int p = 0; p < world; ++p) {
      const Share s = share_of(b.count, world, p);
      counts[static_cast<std::size_t>(p)] = static_cast<int>(s.count);
      offsets[static_cast<std::size_t>(p)] = static_cast<int>(s.offset);
    }
    const int mine = counts[static_cast<std::size_t>(rank())];
    const std::size_t element = dtype_size(b.dtype);
    const std::size_t slot_bytes = static_cast<std::size_t>(mine) * element;
    if (!scratch_ || scratch_->nbytes() < slot_bytes * counts.size())
      scratch_ = std::make_unique<Storage>(slot_bytes * counts.size(), Device::cpu());
    auto* slots = static_cast<char*>(scratch_->data());
    std::vector<int> slot_counts(counts.size(), mine), slot_offsets(counts.size());
    std::vector<const void*> parts(counts.size());
    for (int p = 0; p < world; ++p) {
      slot_offsets[static_cast<std::size_t>(p)] = p * mine;
      parts[static_cast<std::size_t>(p)] = slots + static_cast<std::size_t>(p) * slot_bytes;
    }
    const MPI_Datatype type = mpi_type(b.dtype);
    MPI_Request request = MPI_REQUEST_NULL;
    call(MPI_Ialltoallv(b.data, counts.data(), offsets.data(), type, slots, slot_counts.data(),
                        slot_offsets.data(), type, session_->comm(), &request),
         "MPI_Ialltoallv");
    wait(request);
    dist::sum_in_rank_order(b.dtype, Device::cpu(), mine, parts, slots);
    call(MPI_Iallgatherv(slots, mine, type, b.data, counts.data(), offsets.data(), type,
                         session_->comm(), &request),
         "MPI_Iallgatherv");
    wait(request);
  }

  std::unique_ptr<MpiSession> session_;
  Watchdog watchdog_;
  std::unique_ptr<Storage> scratch_;  // the slots of sum_in_rank_order, kept between calls
};

}  // namespace

std::unique_ptr<Communicator> make_mpi(const Launch& launch, Device device, double timeout_s) {
  auto session = std::make_unique<MpiSession>(timeout_s);
  return std::make_unique<MpiCommunicator>(std::move(session), launch.local_rank, device,
                                           timeout_s);
}

bool mpi_built() { return true; }

}  // namespace kiln::dist
