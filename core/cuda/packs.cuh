// Eight consecutive elements moved as one unit (for .cu files only): the vectorised loads and
// stores of the elementwise, dropout and row kernels. Eight bf16 are one 16-byte access, eight
// float32 two, eight float64 four; the caller checks at run time that the address is 16-byte
// aligned (aligned16) and otherwise moves the elements one by one. Values are converted to the
// compute type C in registers as they arrive (bf16 -> float32 is exact) and rounded once as they
// leave (core/convert.h), so a vectorised and a scalar pass give the same bits.
#pragma once

#include <cstdint>

#include "core/convert.h"
#include "core/host_device.h"

namespace kiln::gpu {

constexpr int kPack = 8;  // elements per pack

template <typename S>
struct alignas(16) Pack {
  S v[kPack];
};

KILN_HOST_DEVICE inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The eight elements at p (16-byte aligned) as C values.
template <typename C, typename S>
__device__ inline void load_pack(const S* p, C (&values)[kPack]) {
  const Pack<S> pack = *reinterpret_cast<const Pack<S>*>(p);
#pragma unroll
  for (int e = 0; e < kPack; ++e) values[e] = convert<C>(pack.v[e]);
}

// The eight values stored at p (16-byte aligned), each converted to S once.
template <typename S, typename C>
__device__ inline void store_pack(S* p, const C (&values)[kPack]) {
  Pack<S> pack;
#pragma unroll
  for (int e = 0; e < kPack; ++e) pack.v[e] = convert<S>(values[e]);
  *reinterpret_cast<Pack<S>*>(p) = pack;
}

}  // namespace kiln::gpu
