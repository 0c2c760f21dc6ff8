// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), and
// kiln's transforms from its 32-bit words to numbers. Shared by the CPU and CUDA backends, so a
// seed gives the same numbers, and the same dropout masks, on every machine and both devices.
//
// Element i of a draw with (seed, offset) reads counter (offset + i / per_counter), where one
// counter yields 4 words:
//   float32 uniform / dropout: 4 elements per counter, word i % 4;
//   float64 uniform:           2 per counter, words (2j, 2j+1) for j = i % 2;
//   normal (both dtypes):      2 per counter, Box-Muller on words (2j, 2j+1), computed in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace kiln::philox {

struct Words {
  std::uint32_t w[4];
};

KILN_HOST_DEVICE inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                     std::uint32_t& lo) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}

// The 4 words for a 128-bit counter (c0..c3) under a 64-bit key (k0, k1).
KILN_HOST_DEVICE inline Words philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                            std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Words{{c0, c1, c2, c3}};
}

// kiln's counter layout: the 64-bit counter index in words 0-1, the seed as the key.
KILN_HOST_DEVICE inline Words draw(std::uint64_t seed, std::uint64_t counter) {
  return philox4x32_10(static_cast<std::uint32_t>(counter),
                       static_cast<std::uint32_t>(counter >> 32), 0u, 0u,
                       static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// [0, 1) with 24 random bits (exact in float).
KILN_HOST_DEVICE inline float uniform_float(std::uint32_t w) {
  return static_cast<float>(w >> 8) * (1.0f / 16777216.0f);
}

// [0, 1) with 53 random bits.
KILN_HOST_DEVICE inline double uniform_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = ((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// A standard normal from two words (Box-Muller, cosine branch), in double.
KILN_HOST_DEVICE inline double normal_from(std::uint32_t a, std::uint32_t b) {
  const double u1 = (static_cast<double>(a) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  const double u2 = static_cast<double>(b) * (1.0 / 4294967296.0);          // [0, 1)
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925 * u2);
}

// Dropout keeps an element when the top 24 bits of its word reach this threshold: P(drop) = p.
inline std::uint32_t dropout_threshold(double p) {
  return static_cast<std::uint32_t>(p * 16777216.0);
}
KILN_HOST_DEVICE inline bool dropout_keep(std::uint32_t w, std::uint32_t threshold) {
  return (w >> 8) >= threshold;
}

// Attention dropout without the probabilities in memory: element (b, i, t, j) of the (B, h, T_q,
// T_k) probabilities is element index = ((b h + i) T_q + t) T_k + j of a dropout draw from
// (seed, offset), so its keep bit is a pure function of (seed, offset, batch, head, query, key),
// and the same mask dropout() draws for the materialized probabilities. The tiled attention
// kernels of both backends call this for each element they recompute.
KILN_HOST_DEVICE inline std::uint64_t attention_dropout_index(std::int64_t batch_head,
                                                              std::int64_t query, std::int64_t key,
                                                              std::int64_t queries,
                                                              std::int64_t keys) {
  return (static_cast<std::uint64_t>(batch_head) * queries + query) * keys + key;
}
KILN_HOST_DEVICE inline bool attention_keep(std::uint64_t seed, std::uint64_t offset,
                                            std::uint64_t index, std::uint32_t threshold) {
  return dropout_keep(draw(seed, offset + index / 4).w[index % 4], threshold);
}

}  // namespace kiln::philox
