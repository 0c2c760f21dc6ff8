// Matrix products on the backend's GEMM (Eigen or OpenBLAS on the CPU, cuBLAS on CUDA).
#pragma once

#include "core/tensor.h"

namespace kiln {

// a (.., n, k) @ b (.., k, m) -> (.., n, m), batch dims broadcast; 1-D operands are treated as
// a row (a) or a column (b) vector and that dim is dropped from the result. Transposed views
// are read in place, without a copy. bf16 operands give a float32 result: bf16 products summed in
// float32. Under an Autocast to bf16 (core/autocast.h) float32 operands are cast to bf16 and the
// result is rounded to bf16.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace kiln
