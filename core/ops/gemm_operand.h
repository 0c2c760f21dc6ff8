// How an op hands a tensor to the backend's GEMM (GemmArgs, core/backend.h): a batch of
// row-major matrices read in place when BLAS can describe them — each matrix's rows contiguous
// and at least a row apart (its leading dimension), or its columns so (read transposed), and one
// stride stepping through the batch dims — else as a contiguous copy. Expanded, stepped and
// permuted views that BLAS cannot describe are copied, never passed on: check_gemm (core/backend.h)
// refuses them. A single row (or column) has no stride to step, so its leading dimension is
// chosen to satisfy BLAS's rule ld >= max(1, row length).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln {

struct GemmOperand {
  Tensor tensor;  // what the GEMM reads: the tensor itself or a contiguous copy of it
  bool transposed = false;
  std::int64_t ld = 1;
  std::int64_t batch_stride = 0;  // elements between consecutive matrices of the flat batch
};

// t (batch.., rows, cols), at least 2-D.
GemmOperand gemm_operand(const Tensor& t);

// The leading dimension of a GEMM's result c (rows, cols) whose rows are contiguous.
std::int64_t gemm_result_ld(const Tensor& c);

}  // namespace kiln
