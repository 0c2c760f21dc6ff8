// Softmax family, fused: one pass per row forward and one backward, from the saved output. A
// bf16 x is computed on in float32 and gives a bf16 result (what backward reads).
#pragma once

#include "core/tensor.h"

namespace kiln {

// exp(x_i - max) / sum_j exp(x_j - max) along dim.
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
// x_i - logsumexp(x) along dim.
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);

// Attention's masked softmax over the last dim of scores (.., T_q, T_k): query row q (counted
// from query_offset, the number of cached positions before it) sees keys 0..q + query_offset;
// later keys get probability exactly 0 and no gradient. Equals softmax(where(mask, S, -inf))
// wherever a row has a visible score above -inf. A row whose visible scores are all -inf has no
// distribution: its visible entries are NaN (as softmax's), its masked ones still exactly 0, where
// the formula makes them NaN too (exp(-inf - -inf)): the mask is applied after the softmax, so a
// key that does not exist yet never holds a value, and the NaN row stays visible in what reads it.
Tensor causal_softmax(const Tensor& scores, std::int64_t query_offset = 0);

}  // namespace kiln
