// CUDA memory: allocation through the caching allocator (with optional NaN poisoning), and
// host<->device copies that are synchronous for the host: they are queued on the backend's stream
// behind the kernels that produce or consume the data, then the stream is waited for, so the host
// buffer may be read or reused as soon as the call returns.
#include <cuda_runtime_api.h>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"

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
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  activate();
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_));
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
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
