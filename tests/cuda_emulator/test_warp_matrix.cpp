// The emulator's tensor-core instructions (cuda_emulator/warp_matrix.h, called through
// core/cuda/warp_matrix.cuh as the kernels call them) against the PTX ISA's fragment layouts,
// written out here from the manual and not from the emulator's code, so that a misreading shared
// by the kernels and the emulator cannot pass:
//   PTX ISA 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix", Figure 104: for an 8 x 8
//     matrix of 16-bit elements, lane l holds row l >> 2, columns 2 (l % 4) and 2 (l % 4) + 1
//     (the first in the low half of its register); register m holds matrix m, whose row r is at
//     the address lane 8 m + r gives; .trans loads the matrix transposed.
//   PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type" (.bf16 A and
//     B, .f32 C and D): groupID = %laneid >> 2, threadID_in_group = %laneid % 4,
//       A (a0..a7, two per .b32 register, low to high):
//         row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise
//         col = threadID_in_group * 2 + (i & 0x1) for i < 4, + 8 for i >= 4
//       B (b0..b3): row = threadID_in_group * 2 + (i & 0x1) for i < 2, + 8 for i >= 2
//                   col = groupID
//       C, D (c0..c3): row = groupID for i < 2, groupID + 8 for i >= 2
//                      col = threadID_in_group * 2 + (i & 0x1)
// And a planted bug of each kind the instructions can have stops the kernel in a child process
// with the emulator's message (a misaligned row, a row past the end of shared memory, lanes that
// disagree on the number of matrices, a row outside shared memory, a lane that skips the
// collective); a transposed layout gives a wrong product that the comparison catches.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/launch.h"
#include "core/cuda/warp_matrix.cuh"
#include "tests/cuda_emulator/death.h"
#include "tests/cuda_emulator/device_buffer.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// ---- The manual's tables

int group_id(int lane) { return lane >> 2; }
int thread_in_group(int lane) { return lane % 4; }

// ldmatrix, Figure 104: element `half` (0 low, 1 high) of a lane's register.
int ldmatrix_row(int lane) { return lane >> 2; }
int ldmatrix_col(int lane, int half) { return 2 * (lane % 4) + half; }

// mma.m16n8k16, .bf16 A: element i = 0..7.
int a_row(int lane, int i) {
  return (i < 2 || (4 <= i && i < 6)) ? group_id(lane) : group_id(lane) + 8;
}
int a_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 0x1) + (i >= 4 ? 8 : 0); }
// .bf16 B: element i = 0..3.
int b_row(int lane, int i) { return thread_in_group(lane) * 2 + (i & 0x1) + (i >= 2 ? 8 : 0); }
int b_col(int lane) { return group_id(lane); }
// .f32 C and D: element i = 0..3.
int c_row(int lane, int i) { return i < 2 ? group_id(lane) : group_id(lane) + 8; }
int c_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 0x1); }

// ---- ldmatrix

// Shared memory: 4 matrices of 8 rows, row r of matrix m at row slot 8 (3 - m) + (7 - r) (each
// slot 16 bytes past a 16-byte gap), so that lane order, row order and memory order all differ.
// Element (m, r, c) holds m * 64 + r * 8 + c.
constexpr int kSlotBytes = 32;
constexpr int kLdmatrixShared = 32 * kSlotBytes;

int slot_of(int m, int r) { return 8 * (3 - m) + (7 - r); }

template <int kMatrices, bool kTranspose>
__global__ void ldmatrix_kernel(std::uint32_t* out) {
  unsigned char* shared = gpu::dynamic_shared<unsigned char>();
  const int lane = static_cast<int>(threadIdx.x);
  for (int r = 0; r < 8; ++r) {  // lane m writes matrix m (lanes 0-3)
    if (lane >= 4) break;
    auto* row = reinterpret_cast<std::uint16_t*>(shared + slot_of(lane, r) * kSlotBytes);
    for (int c = 0; c < 8; ++c) row[c] = static_cast<std::uint16_t>(lane * 64 + r * 8 + c);
  }
  __syncthreads();
  const unsigned char* mine = shared + slot_of(lane / 8, lane % 8) * kSlotBytes;
  std::uint32_t regs[kMatrices];
  if constexpr (kMatrices == 1) {
    if constexpr (kTranspose) {
      gpu::ldmatrix_x1_trans(regs, mine);
    } else {
      gpu::ldmatrix_x1(regs, mine);
    }
  } else if constexpr (kMatrices == 2) {
    if constexpr (kTranspose) {
      gpu::ldmatrix_x2_trans(regs, mine);
    } else {
      gpu::ldmatrix_x2(regs, mine);
    }
  } else {
    if constexpr (kTranspose) {
      gpu::ldmatrix_x4_trans(regs, mine);
    } else {
      gpu::ldmatrix_x4(regs, mine);
    }
  }
  for (int m = 0; m < kMatrices; ++m) out[lane * 4 + m] = regs[m];
}

template <int kMatrices, bool kTranspose>
void check_ldmatrix() {
  INFO("ldmatrix .x" << kMatrices << (kTranspose ? ".trans" : ""));
  const DeviceBuffer<std::uint32_t> out(std::vector<std::uint32_t>(32 * 4, 0));
  KILN_LAUNCH_SHARED(1, 32, kLdmatrixShared, nullptr, ldmatrix_kernel<kMatrices, kTranspose>)
  (out.get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<std::uint32_t> got = out.to_host();
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < kMatrices; ++m) {
      for (int half = 0; half < 2; ++half) {
        int row = ldmatrix_row(lane), col = ldmatrix_col(lane, half);
        if (kTranspose) std::swap(row, col);  // element (row, col) of the transpose
        const std::uint32_t element = got[lane * 4 + m] >> (16 * half) & 0xffffu;
        INFO("lane " << lane << " matrix " << m << " half " << half);
        REQUIRE(element == static_cast<std::uint32_t>(m * 64 + row * 8 + col));
      }
    }
  }
}

// ---- mma.sync

// Fragments of A (16 x 16), B (16 x 8) and C (16 x 8) for each lane, built from the tables:
// a[lane * 4 + r] holds a_{2r} (low) and a_{2r+1}; b[lane * 2 + r] holds b_{2r}, b_{2r+1};
// c[lane * 4 + i] = c_i.
struct Fragments {
  std::vector<std::uint32_t> a, b;
  std::vector<float> c;
};

std::uint32_t bits_of(float x) { return to_bf16(x).bits; }

Fragments fragments_of(const float (&a)[16][16], const float (&b)[16][8], const float (&c)[16][8]) {
  Fragments f{std::vector<std::uint32_t>(32 * 4), std::vector<std::uint32_t>(32 * 2),
              std::vector<float>(32 * 4)};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i)
      f.a[lane * 4 + i / 2] |= bits_of(a[a_row(lane, i)][a_col(lane, i)]) << (16 * (i % 2));
    for (int i = 0; i < 4; ++i)
      f.b[lane * 2 + i / 2] |= bits_of(b[b_row(lane, i)][b_col(lane)]) << (16 * (i % 2));
    for (int i = 0; i < 4; ++i) f.c[lane * 4 + i] = c[c_row(lane, i)][c_col(lane, i)];
  }
  return f;
}

__global__ void mma_kernel(const std::uint32_t* a, const std::uint32_t* b, float* acc) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const std::uint32_t fa[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  const std::uint32_t fb[2] = {b[lane * 2], b[lane * 2 + 1]};
  float* mine = acc + (warp * 32 + lane) * 4;
  float d[4] = {mine[0], mine[1], mine[2], mine[3]};
  gpu::mma_bf16_16816(d, fa, fb);
  for (int i = 0; i < 4; ++i) mine[i] = d[i];
}

// A, B and C with distinct small integers (exact in bf16 and in every sum), none symmetric.
void mma_operands(float (&a)[16][16], float (&b)[16][8], float (&c)[16][8]) {
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) a[r][k] = static_cast<float>((r * 16 + k) % 23 - 11);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) b[k][n] = static_cast<float>((k * 8 + n * 3) % 19 - 9);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) c[r][n] = static_cast<float>(r * 8 + n) * 0.5f;
}

// ---- ldmatrix feeding mma, as the attention kernels do: C = A B^T + 0 with A (16 x 16) and
// B^T (8 x 16) row-major in shared memory (A by ldmatrix.x4, B^T by .x2), and C = A B with B
// (16 x 8) row-major (by .x2.trans). kTransposeBug loads B^T with .trans: a planted layout bug.
template <bool kTransposeBug>
__global__ void gemm_kernel(const std::uint16_t* a, const std::uint16_t* bt, const std::uint16_t* b,
                            float* c_abt, float* c_ab) {
  constexpr int kStride = 24;  // elements per shared row: 16 + 8 of padding, 16-byte aligned
  std::uint16_t* as = gpu::dynamic_shared<std::uint16_t>();
  std::uint16_t* bts = as + 16 * kStride;
  std::uint16_t* bs = bts + 8 * kStride;
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < 16 * 16; e += 32) as[e / 16 * kStride + e % 16] = a[e];
  for (int e = lane; e < 8 * 16; e += 32) bts[e / 16 * kStride + e % 16] = bt[e];
  for (int e = lane; e < 16 * 8; e += 32) bs[e / 8 * kStride + e % 8] = b[e];
  __syncthreads();
  std::uint32_t fa[4], fbt[2], fb[2];
  gpu::ldmatrix_x4(fa, as + (lane % 16) * kStride + (lane / 16) * 8);
  // B^T rows 0-7: columns 0-7 (lanes 0-7 give the rows), then 8-15 (lanes 8-15).
  const std::uint16_t* bt_row = bts + (lane % 8) * kStride + ((lane / 8) % 2) * 8;
  if constexpr (kTransposeBug) {
    gpu::ldmatrix_x2_trans(fbt, bt_row);
  } else {
    gpu::ldmatrix_x2(fbt, bt_row);
  }
  // B rows 0-7, then 8-15, transposed on the way.
  gpu::ldmatrix_x2_trans(fb, bs + (lane % 16) * kStride);
  float abt[4] = {}, ab[4] = {};
  gpu::mma_bf16_16816(abt, fa, fbt);
  gpu::mma_bf16_16816(ab, fa, fb);
  for (int i = 0; i < 4; ++i) {
    c_abt[c_row(lane, i) * 8 + c_col(lane, i)] = abt[i];
    c_ab[c_row(lane, i) * 8 + c_col(lane, i)] = ab[i];
  }
}

constexpr int kGemmShared = (16 + 8 + 16) * 24 * 2;

struct GemmResult {
  std::vector<float> abt, ab, expected;
};

template <bool kTransposeBug>
GemmResult run_gemm() {
  float a[16][16], b[16][8], c[16][8];
  mma_operands(a, b, c);
  std::vector<std::uint16_t> a_bits(16 * 16), bt_bits(8 * 16), b_bits(16 * 8);
  std::vector<float> expected(16 * 8, 0.0f);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) a_bits[r * 16 + k] = to_bf16(a[r][k]).bits;
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) {
      bt_bits[n * 16 + k] = to_bf16(b[k][n]).bits;
      b_bits[k * 8 + n] = to_bf16(b[k][n]).bits;
    }
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) expected[r * 8 + n] += a[r][k] * b[k][n];
  const DeviceBuffer<std::uint16_t> da(a_bits), dbt(bt_bits), db(b_bits);
  const DeviceBuffer<float> abt(16 * 8), ab(16 * 8);
  KILN_LAUNCH_SHARED(1, 32, kGemmShared, nullptr, gemm_kernel<kTransposeBug>)
  (da.get(), dbt.get(), db.get(), abt.get(), ab.get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  return {abt.to_host(), ab.to_host(), expected};
}

// ---- Planted bugs (each runs in a child process)

template <int kOffset, int kSharedBytes, int kLanesWithX2>
__global__ void bad_ldmatrix(std::uint32_t* out) {
  std::uint16_t* shared = gpu::dynamic_shared<std::uint16_t>();
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int e = static_cast<int>(threadIdx.x); e < kSharedBytes / 2; e += 32) shared[e] = 1;
  __syncthreads();
  const unsigned char* row = reinterpret_cast<const unsigned char*>(shared) + lane * 16 + kOffset;
  std::uint32_t regs[4] = {};
  // Lanes below kLanesWithX2 load 2 matrices, the others 4: the same line, other qualifiers.
  kiln::emulator::ldmatrix(lane < kLanesWithX2 ? 2 : 4, false, regs, row,
                           std::source_location::current());
  out[threadIdx.x] = regs[0];
}

__global__ void ldmatrix_from_global(const std::uint16_t* global, std::uint32_t* out) {
  std::uint32_t regs[4];
  gpu::ldmatrix_x4(regs, global + threadIdx.x * 8);
  out[threadIdx.x] = regs[0];
}

template <int kSkippingLane>
__global__ void mma_with_lane_gone(float* out) {
  if (static_cast<int>(threadIdx.x) == kSkippingLane) return;
  const std::uint32_t a[4] = {}, b[2] = {};
  float acc[4] = {};
  gpu::mma_bf16_16816(acc, a, b);
  out[threadIdx.x] = acc[0];
}

__global__ void mma_in_part_of_a_warp(float* out) {
  const std::uint32_t a[4] = {}, b[2] = {};
  float acc[4] = {};
  gpu::mma_bf16_16816(acc, a, b);
  out[threadIdx.x] = acc[0];
}

__global__ void uses_64k_of_shared(float* out) {
  gpu::dynamic_shared<float>()[threadIdx.x] = 1.0f;
  out[threadIdx.x] = gpu::dynamic_shared<float>()[threadIdx.x];
}

}  // namespace

TEST_CASE("emulator/ldmatrix gives each lane the elements of PTX ISA Figure 104", "[emulator]") {
  check_ldmatrix<1, false>();
  check_ldmatrix<2, false>();
  check_ldmatrix<4, false>();
  check_ldmatrix<1, true>();
  check_ldmatrix<2, true>();
  check_ldmatrix<4, true>();
}

TEST_CASE(
    "emulator/mma.sync m16n8k16 bf16 computes D = A B + C in the fragments of PTX ISA "
    "9.7.14.5.8",
    "[emulator]") {
  float a[16][16], b[16][8], c[16][8];
  mma_operands(a, b, c);
  const Fragments f = fragments_of(a, b, c);
  // Two warps with the same fragments: each completes its own mma.
  std::vector<float> acc = f.c;
  acc.insert(acc.end(), f.c.begin(), f.c.end());
  const DeviceBuffer<std::uint32_t> da(f.a), db(f.b);
  const DeviceBuffer<float> dacc(acc);
  // Every lane reads its own fragments (lane index modulo 32).
  KILN_LAUNCH(1, 32, nullptr, mma_kernel)(da.get(), db.get(), dacc.get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<float> got = dacc.to_host();
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const int row = c_row(lane, i), col = c_col(lane, i);
      double expected = c[row][col];
      for (int k = 0; k < 16; ++k) expected += static_cast<double>(a[row][k]) * b[k][col];
      INFO("lane " << lane << " d" << i << " = D[" << row << "][" << col << "]");
      REQUIRE(got[lane * 4 + i] == static_cast<float>(expected));
    }
  }
}

TEST_CASE("emulator/mma.sync rounds the exact sum of bf16 products once to float32", "[emulator]") {
  // 1 + 2^-24 * 16 terms is exact in float64 and rounds to 1 + 2^-20 in float32; a sum rounded
  // term by term in float32 would stay 1 (each 2^-24 is half an ulp, ties to even).
  float a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
  for (int k = 0; k < 16; ++k) a[0][k] = 0x1p-12f, b[k][0] = 0x1p-12f;
  c[0][0] = 1.0f;
  const Fragments f = fragments_of(a, b, c);
  const DeviceBuffer<std::uint32_t> da(f.a), db(f.b);
  const DeviceBuffer<float> dacc(f.c);
  KILN_LAUNCH(1, 32, nullptr, mma_kernel)(da.get(), db.get(), dacc.get());
  REQUIRE(dacc.to_host()[0] == 1.0f + 0x1p-20f);
}

TEST_CASE(
    "emulator/ldmatrix feeds mma as the attention kernels use them, and a transposed "
    "layout is caught",
    "[emulator]") {
  const GemmResult right = run_gemm<false>();
  // A B^T with B^T row-major is A B (the same B); A B with B row-major through .trans.
  REQUIRE(right.abt == right.expected);
  REQUIRE(right.ab == right.expected);
  const GemmResult planted = run_gemm<true>();
  REQUIRE(planted.ab == planted.expected);
  REQUIRE(planted.abt != planted.expected);
}

TEST_CASE("emulator/dynamic shared memory above 48 KB needs cudaFuncSetAttribute", "[emulator]") {
  const DeviceBuffer<float> out(32);
  KILN_LAUNCH_SHARED(1, 32, 64 << 10, nullptr, uses_64k_of_shared)(out.get());
  REQUIRE(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE_THAT(cudaGetErrorString(cudaErrorInvalidValue),
               Catch::Contains("cudaFuncAttributeMaxDynamicSharedMemorySize"));
  REQUIRE(cudaFuncSetAttribute(uses_64k_of_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               300 << 10) == cudaErrorInvalidValue);
  REQUIRE(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(uses_64k_of_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               64 << 10) == cudaSuccess);
  cudaFuncAttributes attributes{};
  REQUIRE(cudaFuncGetAttributes(&attributes, uses_64k_of_shared) == cudaSuccess);
  REQUIRE(attributes.maxDynamicSharedSizeBytes == 64 << 10);
  REQUIRE(attributes.ptxVersion == 90);
  KILN_LAUNCH_SHARED(1, 32, 64 << 10, nullptr, uses_64k_of_shared)(out.get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(out.to_host() == std::vector<float>(32, 1.0f));
}

TEST_CASE("death: ldmatrix with a row not 16-byte aligned", "[.death]") {
  const DeviceBuffer<std::uint32_t> out(32);
  KILN_LAUNCH_SHARED(1, 32, 1024, nullptr, bad_ldmatrix<2, 1024, 0>)(out.get());
}

TEST_CASE("death: ldmatrix with a row past the end of shared memory", "[.death]") {
  const DeviceBuffer<std::uint32_t> out(32);
  KILN_LAUNCH_SHARED(1, 32, 500, nullptr, bad_ldmatrix<0, 500, 0>)(out.get());
}

TEST_CASE("death: ldmatrix with lanes that load different numbers of matrices", "[.death]") {
  const DeviceBuffer<std::uint32_t> out(32);
  KILN_LAUNCH_SHARED(1, 32, 1024, nullptr, bad_ldmatrix<0, 1024, 16>)(out.get());
}

TEST_CASE("death: ldmatrix from global memory", "[.death]") {
  const DeviceBuffer<std::uint16_t> global(32 * 8);
  const DeviceBuffer<std::uint32_t> out(32);
  KILN_LAUNCH_SHARED(1, 32, 1024, nullptr, ldmatrix_from_global)(global.get(), out.get());
}

TEST_CASE("death: mma.sync with a lane that skips it", "[.death]") {
  const DeviceBuffer<float> out(64);
  KILN_LAUNCH(1, 64, nullptr, mma_with_lane_gone<37>)(out.get());
}

TEST_CASE("death: mma.sync in a block of 48 threads", "[.death]") {
  const DeviceBuffer<float> out(48);
  KILN_LAUNCH(1, 48, nullptr, mma_in_part_of_a_warp)(out.get());
}

TEST_CASE("emulator/planted fragment bugs stop the kernel with the warp, the line and the fault",
          "[emulator]") {
  const std::vector<std::string> none;
  REQUIRE_DIES_WITH("death: ldmatrix with a row not 16-byte aligned", none,
                    "kernel bad_ldmatrix<2, 1024, 0>", "warp 0 at tests/cuda_emulator/",
                    "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "lane 0 gives the address",
                    "(offset 2 of dynamic shared memory)", "must be 16-byte aligned");
  REQUIRE_DIES_WITH("death: ldmatrix with a row past the end of shared memory", none,
                    "kernel bad_ldmatrix<0, 500, 0>", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                    "lane 31's row 7 of matrix 3 at offset 496 runs past the end of the "
                    "block's 500 bytes of dynamic shared memory");
  REQUIRE_DIES_WITH("death: ldmatrix with lanes that load different numbers of matrices", none,
                    "kernel bad_ldmatrix<0, 1024, 16>",
                    "waits at ldmatrix.sync.aligned.m8n8.x2.shared.b16(mask 0xffffffff)",
                    "for lane 16, which never arrives",
                    "calls ldmatrix.sync.aligned.m8n8.x4.shared.b16 there (every lane must use "
                    "the same qualifiers)");
  REQUIRE_DIES_WITH("death: ldmatrix from global memory", none, "kernel ldmatrix_from_global",
                    "lane 0 gives the address",
                    "which is not in the block's 1024 bytes of dynamic shared memory");
  REQUIRE_DIES_WITH("death: mma.sync with a lane that skips it", none,
                    "kernel mma_with_lane_gone<37>",
                    "thread (32,0,0) (warp 1, lane 0) waits at "
                    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(mask 0xffffffff) at "
                    "tests/cuda_emulator/test_warp_matrix.cpp:",
                    "for lane 5, which never arrives: thread (37,0,0) (warp 1, lane 5) has exited");
  REQUIRE_DIES_WITH("death: mma.sync in a block of 48 threads", none,
                    "kernel mma_in_part_of_a_warp",
                    "calls mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                    "which needs a whole warp, in a block of 48 threads");
}
