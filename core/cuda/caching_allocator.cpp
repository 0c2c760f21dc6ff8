// The caching allocator's free lists and accounting (design in caching_allocator.h).
#include "core/cuda/caching_allocator.h"

#include <bit>

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"
#include "core/error.h"

#if defined(KILN_CUDA_EMULATE)
#include "cuda_emulator/emulator.h"
#endif

namespace kiln {

namespace {
constexpr std::size_t kSmallQuantum = 512;
constexpr std::size_t kSmallLimit = std::size_t{1} << 20;
constexpr int kStepsPerPowerOfTwo = 8;
}  // namespace

std::size_t CachingAllocator::block_size(std::size_t nbytes) {
  if (nbytes <= kSmallLimit) {
    return std::max<std::size_t>(1, (nbytes + kSmallQuantum - 1) / kSmallQuantum) * kSmallQuantum;
  }
  // floor(power of two) / 8 is at least 128 KiB here, so every block stays 256-byte aligned.
  const std::size_t step = std::bit_floor(nbytes) / kStepsPerPowerOfTwo;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(std::size_t nbytes) {
  const std::size_t size = block_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    ptr = cached->second.back();
    cached->second.pop_back();
  } else {
    ptr = malloc_or_release(size);
  }
  live_blocks_.emplace(ptr, size);
#if defined(KILN_CUDA_EMULATE)
  // The emulator NaN-fills the bytes handed out and guards the rest of the block, so a kernel
  // that writes past its tensor is caught even inside the block's rounding.
  emulator::note_block_in_use(ptr, nbytes);
#endif
  in_use_ += nbytes;
  peak_ = std::max(peak_, in_use_);
  return ptr;
}

void* CachingAllocator::malloc_or_release(std::size_t size) {
  void* ptr = nullptr;
  cudaError_t error = cudaMalloc(&ptr, size);
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it and retry with less held
    // Cached blocks may still be read by queued kernels: let them finish before freeing.
    gpu::wait_for_device();
    release_cached_locked();
    error = cudaMalloc(&ptr, size);
  }
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    fail(
        "cuda:{}: out of memory allocating {} bytes ({} bytes in use by tensors, {} reserved); "
        "use a smaller batch or model",
        device_, size, in_use_, reserved_);
  }
  KILN_CUDA_CHECK(error);
  ++device_allocations_;
  reserved_ += size;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, std::size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(ptr);
  KILN_ASSERT(live != live_blocks_.end());
  free_blocks_[live->second].push_back(ptr);
#if defined(KILN_CUDA_EMULATE)
  emulator::note_block_cached(ptr);  // a kernel that touches it now is using freed memory
#endif
  live_blocks_.erase(live);
  in_use_ -= nbytes;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* p : blocks) KILN_CUDA_CHECK(cudaFree(p));
    reserved_ -= size * blocks.size();
  }
  free_blocks_.clear();
}

std::size_t CachingAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

std::size_t CachingAllocator::peak_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void CachingAllocator::reset_peak_bytes_in_use() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = in_use_;
}

std::size_t CachingAllocator::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

std::int64_t CachingAllocator::device_allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_allocations_;
}

}  // namespace kiln
