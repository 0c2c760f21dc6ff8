// Barriers and warp operations in the emulator: __syncthreads shares a block's shared memory,
// every shuffle variant and vote gives CUDA's result, and what the hardware leaves undefined
// stops the kernel with its name, the thread and the line: a barrier part of the block never
// reaches, a shuffle whose mask names a lane that has exited, threads of one barrier at
// different lines, a mask without the caller's own lane. A planted missing barrier gives wrong
// sums in forward order and is caught by KILN_EMULATOR_ORDER=check.
#include <catch2/catch.hpp>

#include <csignal>
#include <numeric>
#include <vector>

#include "core/cuda/launch.h"
#include "cuda_emulator/emulator.h"
#include "tests/cuda_emulator/death.h"
#include "tests/cuda_emulator/device_buffer.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr int kBlock = 256;

// out[b] = the sum of in[b * 256 .. b * 256 + 255], through shared memory: each thread writes
// its value, thread 0 adds them. Without kBarrier, thread 0 may read before the others write.
template <bool kBarrier>
__global__ void block_sum(const float* in, float* out) {
  __shared__ float values[kBlock];
  values[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  if constexpr (kBarrier) __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (unsigned i = 0; i < blockDim.x; ++i) sum += values[i];
    out[blockIdx.x] = sum;
  }
}

// The sums of 3 blocks of the values 0, 1, 2, ...
std::vector<float> block_sums(bool barrier) {
  std::vector<float> values(3 * kBlock);
  std::iota(values.begin(), values.end(), 0.0f);
  const DeviceBuffer<float> in(values), out(3);
  if (barrier) {
    KILN_LAUNCH(3, kBlock, nullptr, block_sum<true>)(in.get(), out.get());
  } else {
    KILN_LAUNCH(3, kBlock, nullptr, block_sum<false>)(in.get(), out.get());
  }
  REQUIRE(cudaGetLastError() == cudaSuccess);
  return out.to_host();
}

std::vector<float> expected_sums() {
  std::vector<float> sums;
  for (int b = 0; b < 3; ++b) {
    float sum = 0.0f;
    for (int i = 0; i < kBlock; ++i) sum += static_cast<float>(b * kBlock + i);
    sums.push_back(sum);
  }
  return sums;
}

// Restores the thread order when a test ends.
struct OrderScope {
  explicit OrderScope(emulator::ThreadOrder order, std::uint64_t seed = 0)
      : before(emulator::thread_order()) {
    emulator::set_thread_order(order, seed);
  }
  ~OrderScope() { emulator::set_thread_order(before); }
  emulator::ThreadOrder before;
};

// For each lane of a 64-thread block: every shuffle variant and vote, one output row each.
__global__ void warp_ops(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = static_cast<int>(threadIdx.x);
  const unsigned full = 0xffffffffu;
  out[0 * 64 + t] = __shfl_xor_sync(full, t, 5);
  out[1 * 64 + t] = __shfl_xor_sync(full, t, 9, 8);  // past the group of 8: own value
  out[2 * 64 + t] = __shfl_up_sync(full, t, 3);
  out[3 * 64 + t] = __shfl_down_sync(full, t, 3, 16);
  out[4 * 64 + t] = __shfl_sync(full, t, 7);
  out[5 * 64 + t] = __shfl_sync(full, t, 35, 16);  // 35 mod 16 = 3 within each group of 16
  out[6 * 64 + t] = static_cast<int>(__ballot_sync(full, lane % 3 == 0));
  out[7 * 64 + t] = __any_sync(full, t == 40);
  out[8 * 64 + t] = __all_sync(full, lane < 31);
  __syncwarp();
  // Half a warp on its own mask.
  if (lane < 16) out[9 * 64 + t] = __shfl_xor_sync(0x0000ffffu, t, 8);
}

// What CUDA gives lane `lane` of thread t for row `row` of warp_ops.
int expected_warp_op(int row, int t) {
  const int lane = t % 32, warp_base = t - lane;
  switch (row) {
    case 0:
      return warp_base + (lane ^ 5);
    case 1: {
      const int last = (lane & ~7) + 7, from = lane ^ 9;  // an earlier group may be read
      return from > last ? t : warp_base + from;
    }
    case 2:
      return lane < 3 ? t : t - 3;
    case 3:
      return lane % 16 + 3 >= 16 ? t : t + 3;
    case 4:
      return warp_base + 7;
    case 5:
      return warp_base + (lane / 16) * 16 + 3;
    case 6: {
      unsigned ballot = 0;
      for (int j = 0; j < 32; ++j)
        if (j % 3 == 0) ballot |= 1u << j;
      return static_cast<int>(ballot);
    }
    case 7:
      return warp_base == 32 ? 1 : 0;
    case 8:
      return 0;
    case 9:
      return lane < 16 ? warp_base + (lane ^ 8) : -1;
  }
  return -2;
}

__global__ void exit_before_barrier(float* out) {
  if (threadIdx.x >= 100) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void barriers_at_two_lines(float* out) {
  if (threadIdx.x < 128) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_after_exit(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void mask_without_own_lane(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x1u, 1.0f, 1);
}

__global__ void shuffle_from_outside_mask(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1.0f, 16);
}

// Half of each warp waits at a shuffle with the full mask while the other half first shuffles
// among itself: legal on Volta and later, since every lane arrives in the end.
__global__ void halves_meet_later(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  int v = lane;
  if (lane >= 16) v = __shfl_xor_sync(0xffff0000u, v, 1);
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 16);
}

template <typename Kernel>
void launch_256(Kernel kernel_launch) {
  const DeviceBuffer<float> out(kBlock);
  kernel_launch(out.get());
}

}  // namespace

TEST_CASE("emulator/__syncthreads shares a block's __shared__ memory in every thread order",
          "[emulator]") {
  for (auto order : {emulator::ThreadOrder::forward, emulator::ThreadOrder::reverse,
                     emulator::ThreadOrder::shuffle, emulator::ThreadOrder::check}) {
    const OrderScope scope(order, 3);
    INFO("order " << static_cast<int>(order));
    REQUIRE(block_sums(true) == expected_sums());
  }
}

TEST_CASE("emulator/a planted missing barrier gives wrong sums when thread 0 runs first",
          "[emulator]") {
  const OrderScope scope(emulator::ThreadOrder::forward);
  REQUIRE(block_sums(false) != expected_sums());
}

TEST_CASE("death: a missing barrier under KILN_EMULATOR_ORDER=check", "[.death]") {
  block_sums(false);
}

TEST_CASE("emulator/KILN_EMULATOR_ORDER=check stops a kernel with a missing barrier",
          "[emulator]") {
  REQUIRE_DIES_WITH("death: a missing barrier under KILN_EMULATOR_ORDER=check",
                    std::vector<std::string>{"KILN_EMULATOR_ORDER=check"},
                    "kernel block_sum<false>", "depend on the order its threads run",
                    "missing __syncthreads");
}

TEST_CASE("emulator/shuffles and votes give CUDA's results for every variant and width",
          "[emulator]") {
  for (auto order : {emulator::ThreadOrder::forward, emulator::ThreadOrder::shuffle}) {
    const OrderScope scope(order, 11);
    std::vector<int> initial(10 * 64, -1);
    const DeviceBuffer<int> out(initial);
    KILN_LAUNCH(1, 64, nullptr, warp_ops)(out.get());
    const std::vector<int> got = out.to_host();
    for (int row = 0; row < 10; ++row) {
      for (int t = 0; t < 64; ++t) {
        INFO("row " << row << " thread " << t);
        REQUIRE(got[row * 64 + t] == expected_warp_op(row, t));
      }
    }
  }
}

TEST_CASE("emulator/lanes that shuffle among a half-warp first still meet at a full-mask shuffle",
          "[emulator]") {
  const DeviceBuffer<int> out(64);
  KILN_LAUNCH(1, 64, nullptr, halves_meet_later)(out.get());
  const std::vector<int> got = out.to_host();
  for (int t = 0; t < 64; ++t) {
    const int partner = (t % 32) ^ 16;  // the lane read by the last shuffle
    const int expected = partner >= 16 ? partner ^ 1 : partner;
    INFO("thread " << t);
    REQUIRE(got[t] == expected);
  }
}

TEST_CASE("death: a barrier that part of the block never reaches", "[.death]") {
  launch_256([](float* out) { KILN_LAUNCH(2, kBlock, nullptr, exit_before_barrier)(out); });
}

TEST_CASE("death: threads of a block at two different __syncthreads", "[.death]") {
  launch_256([](float* out) { KILN_LAUNCH(1, kBlock, nullptr, barriers_at_two_lines)(out); });
}

TEST_CASE("death: a full-mask shuffle with a lane gone", "[.death]") {
  launch_256([](float* out) { KILN_LAUNCH(1, kBlock, nullptr, shuffle_after_exit)(out); });
}

TEST_CASE("death: a shuffle mask without the calling lane", "[.death]") {
  launch_256([](float* out) { KILN_LAUNCH(1, kBlock, nullptr, mask_without_own_lane)(out); });
}

TEST_CASE("death: a shuffle that reads a lane outside its mask", "[.death]") {
  launch_256([](float* out) { KILN_LAUNCH(1, kBlock, nullptr, shuffle_from_outside_mask)(out); });
}

TEST_CASE("emulator/undefined barriers and shuffles stop with the kernel, the thread and the line",
          "[emulator]") {
  const std::vector<std::string> none;
  REQUIRE_DIES_WITH("death: a barrier that part of the block never reaches", none,
                    "kernel exit_before_barrier (grid (2,1,1), block (256,1,1)), block (0,0,0)",
                    "__syncthreads at tests/cuda_emulator/test_barriers.cpp:",
                    "is reached by 100 of the block's 256 threads",
                    "thread (100,0,0) (warp 3, lane 4) exited without reaching it");
  REQUIRE_DIES_WITH("death: threads of a block at two different __syncthreads", none,
                    "kernel barriers_at_two_lines", "wait at different __syncthreads",
                    "thread (0,0,0) (warp 0, lane 0) at tests/cuda_emulator/test_barriers.cpp:",
                    "thread (128,0,0) (warp 4, lane 0) at tests/cuda_emulator/test_barriers.cpp:");
  REQUIRE_DIES_WITH("death: a full-mask shuffle with a lane gone", none,
                    "kernel shuffle_after_exit",
                    "thread (0,0,0) (warp 0, lane 0) waits at __shfl_xor_sync(mask 0xffffffff)",
                    "for lane 5, which never arrives: thread (5,0,0) (warp 0, lane 5) has exited");
  REQUIRE_DIES_WITH("death: a shuffle mask without the calling lane", none,
                    "kernel mask_without_own_lane", "thread (1,0,0) (warp 0, lane 1)",
                    "with mask 0x00000001, which leaves out its own lane");
  REQUIRE_DIES_WITH("death: a shuffle that reads a lane outside its mask", none,
                    "kernel shuffle_from_outside_mask", "reads lane 16",
                    "not in its mask 0x0000ffff");
}
