// Dropout (Srivastava et al. 2014), inverted: in training each element is zeroed with
// probability p and the rest scaled by 1/(1-p), so evaluation is the identity. The mask comes
// from the Philox generator (core/philox.h): the same seed gives the same mask on every machine
// and on both devices. The backward draws the mask again from the same counters (dx = dy * mask),
// so no mask is kept. A bf16 x gives a bf16 result (multiplied in float32).
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// p in [0, 1). Returns x itself when !training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace kiln
