// Deterministic warp and block reductions (for .cu files only). The order of operations depends
// only on the block's shape: a butterfly of shuffles within each warp, then the same butterfly
// over the warps' results. Partners of a butterfly compute op(a, b) and op(b, a), which are the
// same bits for the commutative ops used here (IEEE addition, min, the arg-max rule), so every
// thread ends with the same result. No atomics.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>
#include <cuda/std/cmath>

#include "core/cuda/launch.h"

namespace kiln::gpu {

constexpr unsigned kFullMask = 0xffffffffu;

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};
// The larger value, ignoring NaN (the CPU's row max: m = x > m ? x : m).
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};

// The reduction of v over the 32 lanes of the warp, in every lane.
template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// The reduction of v over the block, in every thread. blockDim.x is a multiple of 32; `shared`
// holds 32 values; every thread of the block must call it.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity, T* shared) {
  v = warp_reduce(v, op);
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / kWarp ? shared[lane] : identity;
  v = warp_reduce(v, op);
  __syncthreads();  // `shared` may be written again by the caller's next reduction
  return v;
}

// A value and its index along the reduced dim, for max; index < 0 marks "no element yet".
template <typename T>
struct ArgMax {
  T value;
  std::int64_t index;
};

// The CPU's max rule as a commutative choice: the first NaN if there is one, else the largest
// value, ties to the smaller index.
template <typename T>
__device__ ArgMax<T> better(ArgMax<T> a, ArgMax<T> b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = ::cuda::std::isnan(a.value), b_nan = ::cuda::std::isnan(b.value);
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}

template <typename T>
__device__ ArgMax<T> warp_argmax(ArgMax<T> v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const ArgMax<T> other{__shfl_xor_sync(kFullMask, v.value, offset),
                          __shfl_xor_sync(kFullMask, v.index, offset)};
    v = better(v, other);
  }
  return v;
}

// As block_reduce, for ArgMax (two shared arrays of 32).
template <typename T>
__device__ ArgMax<T> block_argmax(ArgMax<T> v, T* shared_values, std::int64_t* shared_indices) {
  v = warp_argmax(v);
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) {
    shared_values[warp] = v.value;
    shared_indices[warp] = v.index;
  }
  __syncthreads();
  v = lane < blockDim.x / kWarp ? ArgMax<T>{shared_values[lane], shared_indices[lane]}
                                : ArgMax<T>{T(0), -1};
  v = warp_argmax(v);
  __syncthreads();
  return v;
}

}  // namespace kiln::gpu
