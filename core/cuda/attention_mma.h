// Causal attention on tensor cores for bf16 Q, K and V (attention_mma.cu): FlashAttention-2 with
// mma.sync bf16 products and float32 accumulators and softmax statistics. CudaBackend's
// attention_forward and attention_backward call these when AttentionArgs::dtype is bf16; Y is
// out_dtype (bf16 or float32), logsumexp float32, and the backward reads a float32 dY and writes
// float32 dQ, dK and dV. d_head up to kMaxAttentionHeadDim. Plain C++: no CUDA header.
#pragma once

#include "core/backend.h"

struct CUstream_st;

namespace kiln {

class CachingAllocator;

namespace gpu {

void attention_forward_mma(const AttentionArgs& args, CUstream_st* stream);
void attention_backward_mma(const AttentionArgs& args, const AttentionGradArgs& grads,
                            CUstream_st* stream, CachingAllocator& allocator);

}  // namespace gpu

}  // namespace kiln
