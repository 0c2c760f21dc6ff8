// The single-process communicator: world size 1, every collective leaves its input as it is.
#include "distributed/backends.h"

namespace kiln::dist {

namespace {

class SingleProcess final : public Communicator {
 public:
  SingleProcess(Device device, double timeout_s)
      : Communicator("single", 0, 1, 0, device, device, timeout_s) {}
  void barrier() override {}

 protected:
  // The base never calls these with world size 1.
  void allreduce_native(const Buffer&, ReduceOp, SumOrder) override {}
  void broadcast_native(const Buffer&, int) override {}
  void allgather_native(const Buffer&, const Buffer&) override {}
};

}  // namespace

std::unique_ptr<Communicator> make_single_process(Device device, double timeout_s) {
  return std::make_unique<SingleProcess>(device, timeout_s);
}

}  // namespace kiln::dist
