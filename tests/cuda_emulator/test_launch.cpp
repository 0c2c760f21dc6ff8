// Launches in the emulator: every thread of a 3-D grid of 3-D blocks runs once with its
// threadIdx, blockIdx, blockDim and gridDim; the grid cap makes grid-stride loops take several
// turns; thread orders are what they say; a bad configuration is cudaErrorInvalidConfiguration;
// a host pointer argument stops the launch; kernels are named with their template arguments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "core/cuda/launch.h"
#include "cuda_emulator/emulator.h"
#include "tests/cuda_emulator/death.h"
#include "tests/cuda_emulator/device_buffer.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// out[linear thread of the grid] = its coordinates packed in decimal digits.
__global__ void coordinates(int* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] =
      static_cast<int>(100000 * blockIdx.z + 10000 * blockIdx.y + 1000 * blockIdx.x +
                       100 * threadIdx.z + 10 * threadIdx.y + threadIdx.x);
}

// turns[i] = the iterations of thread i's grid-stride loop over n items, each item marked.
__global__ void grid_stride(int* marks, int* turns, std::int64_t n) {
  int count = 0;
  for (std::int64_t i = gpu::thread_index(); i < n; i += gpu::thread_count()) {
    marks[i] += 1;
    ++count;
  }
  turns[gpu::thread_index()] = count;
}

// order[k] = the k-th thread to run (a kernel without barriers runs each thread to its end).
__global__ void record_order(int* order, int* next) {
  order[(*next)++] = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void touch(float* out) { out[threadIdx.x] = 0.0f; }

template <typename T, int N>
__global__ void templated(T* out) {
  out[threadIdx.x] = static_cast<T>(N);
}

}  // namespace

TEST_CASE("emulator/every thread of a 3-D grid runs once with its built-in coordinates",
          "[emulator]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int total = 3 * 2 * 2 * 4 * 3 * 2;
  const DeviceBuffer<int> out(std::vector<int>(total, -1));
  KILN_LAUNCH(grid, block, nullptr, coordinates)(out.get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<int> got = out.to_host();
  int k = 0;
  for (int bz = 0; bz < 2; ++bz)
    for (int by = 0; by < 2; ++by)
      for (int bx = 0; bx < 3; ++bx)
        for (int tz = 0; tz < 2; ++tz)
          for (int ty = 0; ty < 3; ++ty)
            for (int tx = 0; tx < 4; ++tx)
              REQUIRE(got[k++] == 100000 * bz + 10000 * by + 1000 * bx + 100 * tz + 10 * ty + tx);
}

TEST_CASE("emulator/the grid cap makes grid-stride loops take several turns", "[emulator]") {
  REQUIRE(gpu::kMaxBlocks == KILN_EMULATOR_MAX_BLOCKS);
  REQUIRE(gpu::blocks_for(std::int64_t{1} << 40) == KILN_EMULATOR_MAX_BLOCKS);
  REQUIRE(gpu::blocks_for(1) == 1);
  const std::int64_t n = 10000;
  const unsigned grid = gpu::blocks_for(n);
  const DeviceBuffer<int> marks(std::vector<int>(n, 0));
  const DeviceBuffer<int> turns(grid * gpu::kThreads);
  KILN_LAUNCH(grid, gpu::kThreads, nullptr, grid_stride)(marks.get(), turns.get(), n);
  for (int mark : marks.to_host()) REQUIRE(mark == 1);  // each item exactly once
  const std::vector<int> per_thread = turns.to_host();
  REQUIRE(*std::max_element(per_thread.begin(), per_thread.end()) > 1);
}

TEST_CASE("emulator/threads and blocks run forward, in reverse or shuffled as set", "[emulator]") {
  const emulator::ThreadOrder before = emulator::thread_order();
  const int n = 2 * 64;
  const auto run = [&](emulator::ThreadOrder order, std::uint64_t seed) {
    emulator::set_thread_order(order, seed);
    const DeviceBuffer<int> order_out(n), next(std::vector<int>{0});
    KILN_LAUNCH(2, 64, nullptr, record_order)(order_out.get(), next.get());
    return order_out.to_host();
  };
  std::vector<int> forward(n);
  for (int i = 0; i < n; ++i) forward[i] = i;
  REQUIRE(run(emulator::ThreadOrder::forward, 0) == forward);
  std::vector<int> reverse(forward.rbegin(), forward.rend());
  REQUIRE(run(emulator::ThreadOrder::reverse, 0) == reverse);
  const std::vector<int> shuffled = run(emulator::ThreadOrder::shuffle, 5);
  REQUIRE(shuffled != forward);
  REQUIRE(std::is_permutation(shuffled.begin(), shuffled.end(), forward.begin()));
  emulator::set_thread_order(before);
}

TEST_CASE("emulator/a launch with a bad configuration is cudaErrorInvalidConfiguration",
          "[emulator]") {
  const DeviceBuffer<float> out(2048);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  KILN_LAUNCH(1, 2048, nullptr, touch)(out.get());
  const cudaError_t error = cudaGetLastError();
  REQUIRE(error == cudaErrorInvalidConfiguration);
  REQUIRE_THAT(cudaGetErrorString(error), Catch::Contains("invalid configuration argument") &&
                                              Catch::Contains("block (2048,1,1)"));
  REQUIRE(cudaGetLastError() == cudaSuccess);  // reading the error cleared it
  KILN_LAUNCH(dim3(1, 70000), 32, nullptr, touch)(out.get());
  REQUIRE(cudaGetLastError() == cudaErrorInvalidConfiguration);
  KILN_LAUNCH(1, 32, reinterpret_cast<cudaStream_t>(0x1234), touch)(out.get());
  REQUIRE(cudaGetLastError() == cudaErrorInvalidResourceHandle);
}

TEST_CASE("emulator/kernels are named with their template arguments", "[emulator]") {
  const std::string name = emulator::kernel_name<&templated<double, 7>>();
  REQUIRE_THAT(name, Catch::Contains("templated<double, 7>"));
}

TEST_CASE("death: a kernel launched with a host pointer", "[.death]") {
  std::vector<float> host(32);
  KILN_LAUNCH(1, 32, nullptr, touch)(host.data());
}

TEST_CASE("emulator/a host pointer argument stops the launch", "[emulator]") {
  REQUIRE_DIES_WITH("death: a kernel launched with a host pointer", std::vector<std::string>{},
                    "kernel touch is launched with a host pointer argument");
}
