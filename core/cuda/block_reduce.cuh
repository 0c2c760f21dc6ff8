// Deterministic warp and block reductions (for .cu files only). The order of operations depends
// only on the block's shape: a butterfly of shuffles within each warp, then the same butterfly
// over the warps' results. Partners of a butterfly compute op(a, b) and op(b, a), which are the
// same bits for the commutative ops used here (IEEE addition, min, the arg-max rule, the
// running max and sum of a one-pass logsumexp), so every thread ends with the same result. No
// atomics.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>
#include <cuda/std/cmath>
#include <cuda/std/limits>

#include "core/cuda/launch.h"
#include "core/elementwise_math.h"

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

// v of the lane whose index is this lane's xor offset (overloaded below for structs).
template <typename T>
__device__ T shuffle_xor(T v, int offset) {
  return __shfl_xor_sync(kFullMask, v, offset);
}

// The reduction of v over the 32 lanes of the warp, in every lane.
template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = op(v, shuffle_xor(v, offset));
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

// The running statistics of a one-pass logsumexp over part of a row: its max and the sum of
// exp(x - max) over its elements (float64, as every row sum). Combining two parts rescales both
// sums to the larger max; the combination is commutative bit for bit, as the butterflies need.
template <typename T>
struct MaxSum {
  T max;
  double sum;
};

template <typename T>
__device__ MaxSum<T> shuffle_xor(MaxSum<T> v, int offset) {
  return {__shfl_xor_sync(kFullMask, v.max, offset), __shfl_xor_sync(kFullMask, v.sum, offset)};
}

// The part's sum relative to max m >= part.max. A part that has seen only -inf contributes 0
// (or its NaN), never exp(-inf - -inf) = NaN.
template <typename T>
__device__ double rescaled(MaxSum<T> part, T m) {
  const bool empty = part.max == -::cuda::std::numeric_limits<T>::infinity();
  return empty ? part.sum * 0.0 : part.sum * ::exp(static_cast<double>(part.max - m));
}

// Adds element x to a part: the sum is rescaled when x raises the max. -inf adds 0, as
// exp(-inf - max) does on the CPU; NaN makes the sum NaN, as it does there.
template <typename T>
__device__ MaxSum<T> add_element(MaxSum<T> part, T x) {
  if (x > part.max) return {x, rescaled(part, x) + 1.0};
  if (x != -::cuda::std::numeric_limits<T>::infinity()) part.sum += math::exp(x - part.max);
  return part;
}

struct MaxSumOp {
  template <typename T>
  __device__ MaxSum<T> operator()(MaxSum<T> a, MaxSum<T> b) const {
    const T m = b.max > a.max ? b.max : a.max;
    return {m, rescaled(a, m) + rescaled(b, m)};
  }
};

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
