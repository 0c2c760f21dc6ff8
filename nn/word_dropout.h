// Word dropout (Gal & Ghahramani 2016; AWD-LSTM's embedding dropout, Merity et al. 2018): in
// training, one inverted-dropout mask m over the vocabulary per call, so that a dropped word
// loses its embedding wherever it occurs in the batch and a kept one is scaled by 1 / (1 - p):
//
//   y[b, t] = x[b, t] m[ids[b, t]],   m[v] = 0 with probability p, else 1 / (1 - p)
//
// The backward is the product's: dx[b, t] = dy[b, t] m[ids[b, t]]. The mask is drawn from `gen`
// as dropout draws (core/ops/dropout.h), so a step keyed by its window draws the same mask on
// every machine and both devices.
#pragma once

#include <cstdint>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln::nn {

// x (B, T, D) embeds ids (B, T) of a vocabulary of `vocab` words; p in [0, 1). Returns x itself
// when !training or p == 0.
Tensor word_dropout(const Tensor& x, const Tensor& ids, std::int64_t vocab, double p, bool training,
                    Generator* gen);

}  // namespace kiln::nn
