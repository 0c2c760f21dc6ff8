// The CUDA backend: cuBLAS GEMM (full FP32, TF32 off), kiln's own kernels (one .cu file per
// family beside this header) and a caching allocator, one instance per device.
//
// Every kernel and cuBLAS call of a device runs on that backend's one stream, in issue order, so
// a block freed to the allocator's cache can be handed out again at once: whatever reads or
// writes it next is queued behind whatever used it before. copy_to_host waits for the stream (a
// counted host synchronisation); copy_from_host returns once CUDA has staged the host buffer,
// without waiting for the stream (core/cuda/memory.cpp).
//
// Ops reach this class through backend_for(Device::cuda(i)); tests and benchmarks that want the
// CUDA-only extras (allocator counters, empty_cache, poisoning) use cuda_backend_at(i). This
// header includes no CUDA header, so plain C++ code can use it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"

struct CUstream_st;      // cudaStream_t is CUstream_st*
struct cublasContext;    // cublasHandle_t is cublasContext*
struct cublasLtContext;  // cublasLtHandle_t is cublasLtContext*

namespace kiln {

class CachingAllocator;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);  // creates the stream and the cuBLAS handle of device `index`
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int index() const { return index_; }
  CUstream_st* stream() const { return stream_; }
  void synchronize();  // waits for everything queued on the stream

  // ---- CUDA-only extras
  // Returns every cached (free) block to the driver; blocks in use stay.
  void empty_cache();
  // Device bytes held from the driver: blocks in use plus cached blocks.
  std::size_t bytes_reserved() const;
  // cudaMalloc calls so far; constant in a steady-state training loop.
  std::int64_t device_allocations() const;
  // Poisoning fills every block handed out by allocate() with 0xFF bytes (NaN in float32 and
  // float64, -1 in int64), so an output element a kernel forgets to write shows up in parity
  // tests. Off unless KILN_CUDA_POISON=1 is set in the environment or a test turns it on.
  void set_poison(bool enabled) { poison_.store(enabled); }
  bool poison() const { return poison_.load(); }

  // ---- Backend
  // The elementwise, dropout and row kernels read and write bf16 themselves, converting in
  // registers (core/cuda/elementwise.cu, random.cu, rows.cu).
  bool kernels_read_bf16() const override { return true; }
  bool checks_on_device() const override { return true; }
  std::unique_ptr<profile::DeviceClock> device_clock() override;
  void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) override;
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override;
  std::size_t bytes_in_use() const override;
  std::size_t peak_bytes_in_use() const override;

#define KILN_KERNEL(result, name, parameters) result name parameters override;
#include "core/backend_kernels.h"
#undef KILN_KERNEL

  // The allocator behind allocate(); kernels take their temporary buffers from it (see
  // core/cuda/scratch.h), never poisoned.
  CachingAllocator& allocator() const { return *allocator_; }

  // ---- Deferred checks (core/cuda/indexing.cu find_invalid_id)
  // Notes an id check of `op` against `limit` rows queued on the stream; returns its number, which
  // its kernel writes into the slot with what it finds.
  std::int64_t defer_id_check(std::string_view op, std::int64_t limit, bool targets);
  // {check number, position, id} of the first invalid id found since the last synchronisation
  // ({-1, -1, -1}: none), on the device.
  std::int64_t* id_check_slot();

 private:
  // Waits for the stream (a counted host synchronisation), then raises what the deferred checks
  // found: a kiln::Error naming the op, the id, its position and the table's rows.
  void wait_and_raise();
  // Makes this backend's device current for the calling thread (CUDA's current device is
  // per thread, and kiln may have backends for several devices).
  void activate() const;

  int index_;
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  cublasLtContext* cublas_lt_ = nullptr;  // for GEMMs with an epilogue (core/cuda/gemm.cpp)
  std::unique_ptr<CachingAllocator> allocator_;
  std::atomic<bool> poison_{false};
  struct PendingIdCheck {
    std::string op;
    std::int64_t limit = 0;
    bool targets = false;
  };
  std::vector<PendingIdCheck> pending_id_checks_;  // since the last synchronisation
  std::int64_t* id_slot_ = nullptr;                // 3 values, cudaMalloc'd on first use
};

// The times the host has waited for a CUDA device so far (every device, every thread): stream and
// device synchronisations and device-to-host copies (core/cuda/host_wait.h). Host-to-device copies
// do not wait (kiln's host buffers are pageable: CUDA stages them before the call returns).
std::int64_t cuda_host_synchronizations();

// The CUDA backend of device `index`, created on first use; a kiln::Error naming cuda:<index> and
// the number of devices when there is no such device.
CudaBackend& cuda_backend_at(int index);

}  // namespace kiln
