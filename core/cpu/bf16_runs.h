// Contiguous runs of bf16 <-> float32 conversions for the CPU kernels (copies across the two
// dtypes, the widened operands of a bf16 GEMM): the scalar rules of core/bf16.h, eight or
// sixteen elements at a time with AVX2 where the build targets it, with the same results bit for
// bit (NaN payloads included). A CPU without bf16 instructions pays for mixed precision in these
// passes, so they run at memory speed.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/cpu/intrinsics.h"

namespace kiln {

// out[i] = to_float(in[i]): the bf16 bits as the top half of a float32.
inline void widen_bf16_run(const bf16* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), wide);
  }
#endif
  for (; i < n; ++i) out[i] = to_float(in[i]);
}

#if defined(__AVX2__)
// to_bf16 of eight floats, as 32-bit lanes holding the 16 result bits.
inline __m256i round_to_bf16_lanes(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i nearest =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
  // NaN (|u| above infinity's encoding; the magnitudes compare as positive int32): the top half
  // with the quiet bit set, as to_bf16 does.
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  return _mm256_blendv_epi8(nearest, quiet, nan);
}
#endif

// out[i] = to_bf16(in[i]): round to nearest, ties to even.
inline void round_to_bf16_run(const float* in, bf16* out, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 16 <= n; i += 16) {
    const __m256i low = round_to_bf16_lanes(_mm256_loadu_ps(in + i));
    const __m256i high = round_to_bf16_lanes(_mm256_loadu_ps(in + i + 8));
    // packus works per 128-bit lane (every value fits 16 bits, so nothing saturates); the
    // permute puts the four quarters back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
#endif
  for (; i < n; ++i) out[i] = to_bf16(in[i]);
}

// out[i] = to_float(to_bf16(in[i])): float32 values rounded to bf16 and widened back (the
// widening GEMM's copy of a float32 operand it multiplies as bf16).
inline void round_through_bf16_run(const float* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_slli_epi32(round_to_bf16_lanes(_mm256_loadu_ps(in + i)), 16));
#endif
  for (; i < n; ++i) out[i] = to_float(to_bf16(in[i]));
}

}  // namespace kiln
