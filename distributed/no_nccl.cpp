// Linked instead of nccl_communicator.cpp when kiln is built without NCCL (without CUDA, or
// without nccl.h and libnccl).
#include "core/error.h"
#include "distributed/backends.h"

namespace kiln::dist {

std::unique_ptr<Communicator> make_nccl(const Launch& launch, double) {
  fail(
      "dist: the NCCL backend is not built into this kiln ({} ranks were launched); reconfigure "
      "with -DKILN_CUDA=ON on a machine with the CUDA toolkit and NCCL",
      launch.world_size);
}

bool nccl_built() { return false; }

}  // namespace kiln::dist
