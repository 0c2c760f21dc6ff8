// ldmatrix and mma.sync on the emulated device (see warp_matrix.h): warp-collective operations
// whose `complete` checks every lane's operands and then moves the elements between lanes as the
// PTX ISA's fragment layouts say (9.7.14.5.8 for mma.m16n8k16 with .bf16, 9.7.14.5.15 for
// ldmatrix). tests/cuda_emulator/test_warp_matrix.cpp holds those layout tables independently.
#include "cuda_emulator/warp_matrix.h"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "cuda_emulator/kernel.h"
#include "cuda_emulator/report.h"

namespace kiln::emulator {

namespace {

constexpr int kRowBytes = 16;  // a row of an 8 x 8 matrix of 16-bit elements

struct LdmatrixLane {
  const unsigned char* row;
  std::uint32_t* regs;
};

// The 8 x 8 matrices' rows are checked before any is read: each lies in the block's dynamic
// shared memory and starts on a 16-byte boundary.
template <int kMatrices, bool kTranspose>
std::string complete_ldmatrix(void* const lanes[kWarpSize]) {
  std::size_t bytes = 0;
  const unsigned char* shared = dynamic_shared_memory(&bytes);
  std::uint16_t m[kMatrices][8][8];
  for (int lane = 0; lane < 8 * kMatrices; ++lane) {
    const unsigned char* row = static_cast<const LdmatrixLane*>(lanes[lane])->row;
    const auto at = reinterpret_cast<std::uintptr_t>(row);
    const auto begin = reinterpret_cast<std::uintptr_t>(shared);
    if (shared == nullptr || at < begin || at >= begin + bytes)
      return fmt::format(
          "lane {} gives the address {} for row {} of matrix {}, which is not in the block's {} "
          "bytes of dynamic shared memory{}",
          lane, hex(row), lane % 8, lane / 8, bytes,
          shared == nullptr ? "" : fmt::format(" (at {})", hex(shared)));
    const std::uintptr_t offset = at - begin;
    if (offset % kRowBytes != 0)
      return fmt::format(
          "lane {} gives the address {} (offset {} of dynamic shared memory) for row {} of "
          "matrix {}: a row is 16 bytes and must be 16-byte aligned",
          lane, hex(row), offset, lane % 8, lane / 8);
    if (offset + kRowBytes > bytes)
      return fmt::format(
          "lane {}'s row {} of matrix {} at offset {} runs past the end of the block's {} bytes "
          "of dynamic shared memory",
          lane, lane % 8, lane / 8, offset, bytes);
    std::memcpy(m[lane / 8][lane % 8], row, kRowBytes);
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    std::uint32_t* regs = static_cast<const LdmatrixLane*>(lanes[lane])->regs;
    const int row = lane / 4, col = 2 * (lane % 4);
    for (int i = 0; i < kMatrices; ++i) {
      const std::uint32_t lo = kTranspose ? m[i][col][row] : m[i][row][col];
      const std::uint32_t hi = kTranspose ? m[i][col + 1][row] : m[i][row][col + 1];
      regs[i] = lo | hi << 16;
    }
  }
  return {};
}

constexpr WarpCollective kLdmatrix[3][2] = {
    {{"ldmatrix.sync.aligned.m8n8.x1.shared.b16", &complete_ldmatrix<1, false>},
     {"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", &complete_ldmatrix<1, true>}},
    {{"ldmatrix.sync.aligned.m8n8.x2.shared.b16", &complete_ldmatrix<2, false>},
     {"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", &complete_ldmatrix<2, true>}},
    {{"ldmatrix.sync.aligned.m8n8.x4.shared.b16", &complete_ldmatrix<4, false>},
     {"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", &complete_ldmatrix<4, true>}}};

struct MmaLane {
  float* acc;
  const std::uint32_t* a;
  const std::uint32_t* b;
};

double bf16_value(std::uint32_t reg, int half) {
  const std::uint32_t bits = (half == 0 ? reg & 0xffffu : reg >> 16) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// D = A B + C with the fragments of PTX ISA 9.7.14.5.8, groupID = lane / 4 and
// threadID_in_group = lane % 4: a_i at row groupID (+ 8 for i = 2, 3, 6, 7), column
// 2 threadID_in_group + (i & 1) (+ 8 for i >= 4); b_i at row 2 threadID_in_group + (i & 1)
// (+ 8 for i >= 2), column groupID; c_i at row groupID (+ 8 for i >= 2), column
// 2 threadID_in_group + (i & 1). Register r holds elements 2r (low half) and 2r + 1.
std::string complete_mma(void* const lanes[kWarpSize]) {
  double a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const auto& l = *static_cast<const MmaLane*>(lanes[lane]);
    const int group = lane / 4, in_group = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = group + ((i / 2) % 2) * 8, col = 2 * in_group + (i & 1) + (i / 4) * 8;
      a[row][col] = bf16_value(l.a[i / 2], i % 2);
    }
    for (int i = 0; i < 4; ++i)
      b[2 * in_group + (i & 1) + (i / 2) * 8][group] = bf16_value(l.b[i / 2], i % 2);
    for (int i = 0; i < 4; ++i) c[group + (i / 2) * 8][2 * in_group + (i & 1)] = l.acc[i];
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const auto& l = *static_cast<const MmaLane*>(lanes[lane]);
    const int group = lane / 4, in_group = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = group + (i / 2) * 8, col = 2 * in_group + (i & 1);
      double sum = c[row][col];
      for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][col];
      l.acc[i] = static_cast<float>(sum);
    }
  }
  return {};
}

constexpr WarpCollective kMma{"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", &complete_mma};

}  // namespace

void ldmatrix(int matrices, bool transpose, std::uint32_t* regs, const void* row_address,
              const std::source_location& where) {
  if (matrices != 1 && matrices != 2 && matrices != 4) [[unlikely]]
    fatal(fmt::format("{}: ldmatrix of {} matrices (.x1, .x2 or .x4)", kernel_context(), matrices));
  LdmatrixLane lane{static_cast<const unsigned char*>(row_address), regs};
  warp_collective(kLdmatrix[matrices / 2][transpose ? 1 : 0], &lane, where);
}

void mma_m16n8k16_bf16(float* acc, const std::uint32_t* a, const std::uint32_t* b,
                       const std::source_location& where) {
  MmaLane lane{acc, a, b};
  warp_collective(kMma, &lane, where);
}

}  // namespace kiln::emulator
