// CUDA memory: allocation through the caching allocator (with optional NaN poisoning), and
// host<->device copies queued on the backend's stream behind the kernels that produce or consume
// the data. A copy to the host waits for it (counted: core/cuda/host_wait.h), so the host buffer
// may be read at once. A copy from the host does not wait: kiln's host buffers are pageable, and
// CUDA copies pageable memory into its own staging buffer before cudaMemcpyAsync returns, so the
// source may be reused or freed as soon as the call returns (CUDA Runtime API, "API
// synchronization behavior"); a training step's batch upload then costs no stall.
#include <array>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"
#include "core/error.h"

namespace kiln {

void* CudaBackend::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  activate();
  void* ptr = allocator_->allocate(nbytes);
  // 0xFF bytes are a NaN in float32 and float64: an output element a kernel leaves unwritten
  // stays NaN and fails the comparison with the CPU.
  if (poison()) KILN_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, nbytes, stream_));
  return ptr;
}

// No CUDA call: the block goes back to the cache (Storage's destructor cannot take an error).
void CudaBackend::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr != nullptr) allocator_->deallocate(ptr, nbytes);
}

void CudaBackend::copy_from_host(void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  activate();
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  activate();
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_));
  wait_and_raise();
}

void CudaBackend::synchronize() {
  activate();
  wait_and_raise();
}

std::int64_t CudaBackend::defer_id_check(std::string_view op, std::int64_t limit, bool targets) {
  pending_id_checks_.push_back({std::string(op), limit, targets});
  return static_cast<std::int64_t>(pending_id_checks_.size()) - 1;
}

std::int64_t* CudaBackend::id_check_slot() {
  if (id_slot_ == nullptr) {
    void* slot = nullptr;
    KILN_CUDA_CHECK(cudaMalloc(&slot, 3 * sizeof(std::int64_t)));
    id_slot_ = static_cast<std::int64_t*>(slot);
    KILN_CUDA_CHECK(cudaMemsetAsync(id_slot_, 0xFF, 3 * sizeof(std::int64_t), stream_));  // -1
  }
  return id_slot_;
}

void CudaBackend::wait_and_raise() {
  std::array<std::int64_t, 3> found = {-1, -1, -1};
  const bool checking = !pending_id_checks_.empty();
  // The slot comes back with the wait the caller needed anyway: one synchronisation for both.
  if (checking)
    KILN_CUDA_CHECK(
        cudaMemcpyAsync(found.data(), id_slot_, sizeof found, cudaMemcpyDeviceToHost, stream_));
  gpu::wait_for_stream(stream_);
  if (!checking) return;
  const std::vector<PendingIdCheck> checks = std::move(pending_id_checks_);
  pending_id_checks_.clear();
  if (found[0] < 0) return;
  KILN_CUDA_CHECK(cudaMemsetAsync(id_slot_, 0xFF, sizeof found, stream_));
  const PendingIdCheck& check = checks.at(static_cast<std::size_t>(found[0]));
  const std::string range = check.targets ? fmt::format(
                                                "target {} at position {} is out of range for {} "
                                                "classes",
                                                found[2], found[1], check.limit)
                                          : fmt::format(
                                                "id {} at position {} is out of range for a table "
                                                "of {} rows",
                                                found[2], found[1], check.limit);
  fail("{}: {} (found on cuda:{} by a check on the device, raised at this synchronisation)",
       check.op, range, index_);
}

std::size_t CudaBackend::bytes_in_use() const { return allocator_->bytes_in_use(); }
std::size_t CudaBackend::peak_bytes_in_use() const { return allocator_->peak_bytes_in_use(); }
std::size_t CudaBackend::bytes_reserved() const { return allocator_->bytes_reserved(); }
std::int64_t CudaBackend::device_allocations() const { return allocator_->device_allocations(); }

void CudaBackend::empty_cache() {
  synchronize();  // cached blocks may still be used by queued kernels
  allocator_->release_cached();
}

}  // namespace kiln
