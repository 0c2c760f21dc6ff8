// Lazy discovery of CUDA devices and one CudaBackend per device, created on first use. Nothing
// here touches CUDA until cuda_device_count() is called or a CUDA tensor is created, so programs
// and test listings that never ask for a GPU never initialise CUDA.
//
// Backends are created once and deliberately never destroyed: tensors in static storage may be
// freed after main returns, when the CUDA runtime may already be shutting down, and the driver
// reclaims the device memory at process exit.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/native_bf16.h"

namespace kiln {

namespace {

struct DeviceCount {
  int count = 0;
  std::string problem;  // why there are none, when the driver said so
};

// Asked once; any error (no driver, a driver too old for this runtime, no device) means 0.
const DeviceCount& device_count() {
  static const DeviceCount answer = [] {
    DeviceCount result;
    const cudaError_t error = cudaGetDeviceCount(&result.count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      result.count = 0;
      result.problem = cudaGetErrorString(error);
    }
    return result;
  }();
  return answer;
}

struct Registry {
  std::mutex mutex;
  std::vector<std::atomic<CudaBackend*>> backends;
  explicit Registry(int count) : backends(count) {}
};

Registry& registry() {
  static Registry* instance = new Registry(device_count().count);  // never destroyed (see top)
  return *instance;
}

bool poison_from_environment() {
  const char* value = std::getenv("KILN_CUDA_POISON");
  return value != nullptr && std::strcmp(value, "0") != 0 && value[0] != '\0';
}

}  // namespace

int cuda_device_count() { return device_count().count; }

std::string cuda_device_name(int index) {
  cuda_backend_at(index);  // the error for a missing device
  cudaDeviceProp properties{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
  return properties.name;
}

NativeBf16 cuda_native_bf16(int index) {
  cuda_backend_at(index);  // the error for a missing device
  cudaDeviceProp properties{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
  const bool tensor_cores = properties.major >= 8;
  return {tensor_cores,
          fmt::format("{} (sm_{}{}) {} bf16 tensor cores", properties.name, properties.major,
                      properties.minor, tensor_cores ? "has" : "has no")};
}

CudaBackend& cuda_backend_at(int index) {
  const DeviceCount& devices = device_count();
  KILN_CHECK(index >= 0 && index < devices.count,
             "device cuda:{}: no such CUDA device ({} CUDA device{} found{}{})", index,
             devices.count, devices.count == 1 ? "" : "s", devices.problem.empty() ? "" : ": ",
             devices.problem);
  Registry& r = registry();
  std::atomic<CudaBackend*>& slot = r.backends[index];
  CudaBackend* backend = slot.load(std::memory_order_acquire);
  if (backend == nullptr) {
    std::lock_guard<std::mutex> lock(r.mutex);
    backend = slot.load(std::memory_order_relaxed);
    if (backend == nullptr) {
      backend = new CudaBackend(index);  // never destroyed (see top)
      slot.store(backend, std::memory_order_release);
    }
  }
  return *backend;
}

Backend& cuda_backend(int index) { return cuda_backend_at(index); }

CudaBackend::CudaBackend(int index)
    : index_(index), allocator_(std::make_unique<CachingAllocator>(index)) {
  activate();
  cudaStream_t stream = nullptr;
  KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  cublasHandle_t handle = nullptr;
  KILN_CUBLAS_CHECK(cublasCreate(&handle));
  cublas_ = handle;
  KILN_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // Full FP32: no TF32 tensor-op math unless asked for; no atomics, so results are reproducible.
  KILN_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  KILN_CUBLAS_CHECK(cublasSetAtomicsMode(handle, CUBLAS_ATOMICS_NOT_ALLOWED));
  cublasLtHandle_t lt = nullptr;
  KILN_CUBLAS_CHECK(cublasLtCreate(&lt));
  cublas_lt_ = lt;
  poison_.store(poison_from_environment());
}

// Only reached for a backend made outside the registry; errors cannot propagate from here.
CudaBackend::~CudaBackend() {
  if (cudaSetDevice(index_) != cudaSuccess) return;
  (void)cudaStreamSynchronize(stream_);  // uncounted: errors cannot propagate from here
  allocator_->release_cached();
  if (id_slot_ != nullptr) (void)cudaFree(id_slot_);
  (void)cublasLtDestroy(cublas_lt_);
  (void)cublasDestroy(cublas_);
  (void)cudaStreamDestroy(stream_);
}

void CudaBackend::activate() const { KILN_CUDA_CHECK(cudaSetDevice(index_)); }

}  // namespace kiln
