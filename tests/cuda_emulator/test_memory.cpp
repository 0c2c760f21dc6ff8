// Device memory in the emulator: fresh allocations are NaN; a copy checks its direction and its
// range; a planted out-of-bounds write is caught at the faulting thread (past the allocation's
// end) or after the launch (in the red zone past a tensor's bytes inside its block); host code
// that reads device memory stops, with protection keys and with mprotect; a kernel that touches
// a freed tensor stops; the memory limit drives the caching allocator's out-of-memory path.
// Events hold the host clock of their record (the emulator's stand-in for a GPU's timer).
#include <catch2/catch.hpp>

#include <cmath>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/launch.h"
#include "core/kiln.h"
#include "cuda_emulator/emulator.h"
#include "tests/cuda_emulator/death.h"
#include "tests/cuda_emulator/device_buffer.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

__global__ void write_at(float* out, std::int64_t index) {
  if (blockIdx.x == 1 && threadIdx.x == 3) out[index] = 1.0f;
}

__global__ void fill_ones(float* out, std::int64_t n) {
  for (std::int64_t i = gpu::thread_index(); i < n; i += gpu::thread_count()) out[i] = 1.0f;
}

// Sets the emulated memory limit for a scope.
struct LimitScope {
  explicit LimitScope(std::size_t bytes) : before(emulator::memory_limit()) {
    emulator::set_memory_limit(bytes);
  }
  ~LimitScope() { emulator::set_memory_limit(before); }
  std::size_t before;
};

const std::vector<std::string> kNoEnvironment;

}  // namespace

TEST_CASE("emulator/fresh device memory is NaN", "[emulator]") {
  const DeviceBuffer<float> f(1000);
  for (float v : f.to_host()) REQUIRE(std::isnan(v));
  const DeviceBuffer<double> d(100);
  for (double v : d.to_host()) REQUIRE(std::isnan(v));
  // Every block the caching allocator hands out is NaN too, whatever was in it before.
  for (int round = 0; round < 2; ++round) {
    const Tensor t = empty({300}, {DType::f32, Device::cuda()});
    for (float v : t.to_vector<float>()) REQUIRE(std::isnan(v));
    const Tensor ones_now = ones({300}, {DType::f32, Device::cuda()});
    REQUIRE(ones_now.sum().item<float>() == 300.0f);
  }
}

TEST_CASE("emulator/copies check their direction and stay inside an allocation", "[emulator]") {
  std::vector<float> host(64, 2.0f), back(64);
  float* device = nullptr;
  REQUIRE(cudaMalloc(&device, 64 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(device, host.data(), 256, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), device, 256, cudaMemcpyDefault) == cudaSuccess);
  REQUIRE(back == host);

  cudaError_t error = cudaMemcpy(back.data(), host.data(), 256, cudaMemcpyHostToDevice);
  REQUIRE(error == cudaErrorInvalidValue);
  REQUIRE_THAT(cudaGetErrorString(error), Catch::Contains("cudaMemcpyHostToDevice") &&
                                              Catch::Contains("the destination") &&
                                              Catch::Contains("is host memory"));
  error = cudaMemcpy(device, device, 256, cudaMemcpyDeviceToHost);
  REQUIRE(error == cudaErrorInvalidValue);
  REQUIRE_THAT(cudaGetErrorString(error),
               Catch::Contains("the destination") && Catch::Contains("is device memory"));
  error = cudaMemcpy(device + 1, host.data(), 256, cudaMemcpyHostToDevice);
  REQUIRE(error == cudaErrorInvalidValue);
  REQUIRE_THAT(cudaGetErrorString(error),
               Catch::Contains("outside the 256 bytes in use of the allocation"));
  REQUIRE(cudaMemset(device + 60, 0, 32) == cudaErrorInvalidValue);
  REQUIRE(cudaFree(device) == cudaSuccess);
  REQUIRE(cudaFree(device) == cudaErrorInvalidValue);  // freed already
  REQUIRE(cudaMemcpy(back.data(), device, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  REQUIRE_THAT(cudaGetErrorString(cudaErrorInvalidValue), Catch::Contains("not allocated"));
}

TEST_CASE("death: a kernel writes past the end of its allocation", "[.death]") {
  const DeviceBuffer<float> out(1000);  // 4000 bytes on one page
  KILN_LAUNCH(2, 32, nullptr, write_at)(out.get(), 1024);
}

TEST_CASE("death: a kernel writes past a tensor inside its block", "[.death]") {
  // 3000 bytes in a 3072-byte caching-allocator block: element 750 is in the block's red zone.
  const Tensor t = empty({750}, {DType::f32, Device::cuda()});
  KILN_LAUNCH(2, 32, nullptr, write_at)(static_cast<float*>(t.raw_data()), 750);
}

TEST_CASE("death: host code reads device memory", "[.death]") {
  const Tensor t = ones({8}, {DType::f32, Device::cuda()});
  volatile float v = static_cast<const float*>(t.raw_data())[2];
  (void)v;
}

TEST_CASE("death: a kernel writes to a freed tensor", "[.death]") {
  float* stale = nullptr;
  {
    const Tensor t = empty({256}, {DType::f32, Device::cuda()});
    stale = static_cast<float*>(t.raw_data());
  }
  KILN_LAUNCH(1, 256, nullptr, fill_ones)(stale, 256);
}

TEST_CASE("emulator/a planted out-of-bounds write stops with the kernel and what it hit",
          "[emulator]") {
  // Past the allocation: the guard page faults at the writing thread.
  REQUIRE_DIES_WITH("death: a kernel writes past the end of its allocation", kNoEnvironment,
                    "kernel write_at (grid (2,1,1), block (32,1,1)), block (1,0,0), thread "
                    "(3,0,0) (warp 0, lane 3): invalid device memory access",
                    "96 bytes past the end of the 4000 bytes in use of the allocation");
  // Inside the block's rounding: the red zone has changed when the launch ends.
  REQUIRE_DIES_WITH("death: a kernel writes past a tensor inside its block", kNoEnvironment,
                    "kernel write_at wrote out of bounds",
                    "0 bytes past the end of the 3000 bytes in use of the allocation");
  REQUIRE_DIES_WITH("death: a kernel writes to a freed tensor", kNoEnvironment, "kernel fill_ones",
                    "invalid device memory access", "held free by the caching allocator");
}

TEST_CASE("emulator/host code that reads device memory stops, with protection keys or mprotect",
          "[emulator]") {
  if (emulator::uses_protection_keys()) {
    REQUIRE_DIES_WITH("death: host code reads device memory", kNoEnvironment,
                      "host code accessed device memory at", "byte 8 of the 32-byte allocation at",
                      "backtrace:");
  } else {
    WARN("this CPU has no protection keys: only the mprotect variant runs");
  }
  REQUIRE_DIES_WITH("death: host code reads device memory",
                    std::vector<std::string>{"KILN_EMULATOR_PROTECTION=mprotect"},
                    "host code accessed device memory at", "byte 8 of the 32-byte allocation at");
}

TEST_CASE("emulator/the memory limit drives the caching allocator's out-of-memory path",
          "[emulator]") {
  const std::size_t mib = std::size_t{1} << 20;
  const LimitScope limit(emulator::bytes_allocated() + 8 * mib);
  CachingAllocator allocator(0);
  void* six = allocator.allocate(6 * mib);
  allocator.deallocate(six, 6 * mib);  // cached: 6 MiB stay reserved
  REQUIRE(allocator.bytes_reserved() == 6 * mib);
  // 4 MiB more do not fit beside the cached 6: the cache is released and the allocation retried.
  void* four = allocator.allocate(4 * mib);
  REQUIRE(allocator.device_allocations() == 2);
  REQUIRE(allocator.bytes_reserved() == 4 * mib);
  // 6 MiB do not fit beside the 4 in use even with nothing cached: a clear error.
  REQUIRE_THROWS_WITH(allocator.allocate(6 * mib),
                      Catch::Contains("cuda:0: out of memory allocating 6291456 bytes") &&
                          Catch::Contains("4194304 bytes in use by tensors"));
  allocator.deallocate(four, 4 * mib);
  allocator.release_cached();
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  REQUIRE(total == emulator::memory_limit());
  REQUIRE(free == total - emulator::bytes_allocated());
}

TEST_CASE("emulator/a tensor beyond the memory limit is a kiln::Error naming the device",
          "[emulator]") {
  const LimitScope limit(emulator::bytes_allocated() + (std::size_t{16} << 20));
  REQUIRE_THROWS_WITH(empty({8, 1024, 1024}, {DType::f32, Device::cuda()}),
                      Catch::Contains("cuda:0: out of memory"));
  const Tensor fits = zeros({1024, 1024}, {DType::f32, Device::cuda()});
  REQUIRE(fits.sum().item<float>() == 0.0f);
}

TEST_CASE("emulator/events hold the host clock of their record, and a wait on one is counted",
          "[emulator]") {
  cudaEvent_t start = nullptr, end = nullptr;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&end) == cudaSuccess);
  float ms = -1.0f;
  // Never recorded: CUDA's error, and the emulator's detail.
  CHECK(cudaEventElapsedTime(&ms, start, end) == cudaErrorInvalidResourceHandle);
  CHECK(std::string(cudaGetErrorString(cudaGetLastError())).find("never recorded") !=
        std::string::npos);
  CHECK(cudaEventQuery(end) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  REQUIRE(cudaEventRecord(start, nullptr) == cudaSuccess);
  DeviceBuffer<float> buffer(1 << 16);
  KILN_LAUNCH(64, 256, nullptr, fill_ones)(buffer.get(), std::int64_t{1} << 16);
  REQUIRE(cudaEventRecord(end, nullptr) == cudaSuccess);
  CHECK(cudaEventQuery(end) == cudaSuccess);  // every call is synchronous: done when recorded
  const std::int64_t waits = emulator::host_synchronizations();
  REQUIRE(cudaEventSynchronize(end) == cudaSuccess);
  CHECK(emulator::host_synchronizations() == waits + 1);
  REQUIRE(cudaEventElapsedTime(&ms, start, end) == cudaSuccess);
  CHECK(ms > 0.0f);  // the launch ran between the records
  REQUIRE(cudaEventElapsedTime(&ms, end, start) == cudaSuccess);
  CHECK(ms < 0.0f);
  REQUIRE(cudaEventDestroy(start) == cudaSuccess);
  REQUIRE(cudaEventDestroy(end) == cudaSuccess);
  CHECK(cudaEventDestroy(end) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}
