// The materializing algorithm of causal_attention (core/ops/attention.h), kept for the callers
// that want the attention probabilities themselves (attention maps) and for head sizes above
// the tiled kernels' limit: S (B, h, T, T) by one strided-batched GEMM per head, the causal
// softmax in place, dropout, Y = A V; the backward from the stored A (and the dropped A).
// Memory grows with T^2. Internal to core/ops (not part of the public API).
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// Arguments as causal_attention's, already checked; `probabilities` may be null.
Tensor materialized_causal_attention(const Tensor& projected, std::int64_t heads,
                                     std::int64_t kv_heads, double dropout_p, bool training,
                                     Generator* gen, Tensor* probabilities);

}  // namespace kiln
