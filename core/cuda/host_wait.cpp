// The counted blocking calls of host_wait.h.
#include "core/cuda/host_wait.h"

#include <atomic>
#include <cstdint>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"

namespace kiln {

namespace {

std::atomic<std::int64_t> host_waits{0};

void count() { host_waits.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::int64_t cuda_host_synchronizations() { return host_waits.load(std::memory_order_relaxed); }

namespace gpu {

void wait_for_stream(cudaStream_t stream) {
  count();
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void wait_for_device() {
  count();
  KILN_CUDA_CHECK(cudaDeviceSynchronize());
}

void wait_for_event(cudaEvent_t event) {
  count();
  KILN_CUDA_CHECK(cudaEventSynchronize(event));
}

}  // namespace gpu

}  // namespace kiln
