// Dropout (Srivastava et al. 2014), inverted: in training each element is zeroed with
// probability p and the rest scaled by 1/(1-p), so evaluation is the identity. The mask comes
// from the Philox generator (core/philox.h): the same seed gives the same mask on every machine
// and on both devices. It is saved for backward (dx = dy * mask).
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// p in [0, 1). Returns x itself when !training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace kiln
