#include "core/ops/gemm_operand.h"

#include <algorithm>

namespace kiln {

namespace {

// The single stride that steps through all batch dims in row-major order, if there is one.
bool flat_batch_stride(const Tensor& t, std::int64_t& stride) {
  const std::int64_t nbatch = t.dim() - 2;
  stride = 0;
  std::int64_t expected = -1;  // stride the next-outer dim must have
  for (std::int64_t i = nbatch - 1; i >= 0; --i) {
    const std::int64_t size = t.shape()[i], st = t.strides()[i];
    if (size == 1) continue;
    if (expected < 0) {
      stride = st;
    } else if (st != expected) {
      return false;
    }
    expected = st * size;
  }
  return true;
}

}  // namespace

GemmOperand gemm_operand(const Tensor& t) {
  const std::int64_t rows = t.size(-2), cols = t.size(-1);
  const std::int64_t rs = t.strides()[t.dim() - 2], cs = t.strides()[t.dim() - 1];
  // BLAS's least leading dimension for the matrix stored as is, and transposed.
  const std::int64_t row_length = std::max<std::int64_t>(cols, 1);
  const std::int64_t column_length = std::max<std::int64_t>(rows, 1);
  GemmOperand operand{t};
  std::int64_t batch_stride = 0;
  const bool batch_ok = flat_batch_stride(t, batch_stride);
  if (batch_ok && (cs == 1 || cols == 1) && (rs >= row_length || rows == 1)) {
    operand.ld = std::max(rs, row_length);  // a single row's stride is never stepped
  } else if (batch_ok && (rs == 1 || rows == 1) && (cs >= column_length || cols == 1)) {
    operand.transposed = true;
    operand.ld = std::max(cs, column_length);
  } else {
    operand.tensor = t.contiguous();
    operand.ld = row_length;
    flat_batch_stride(operand.tensor, batch_stride);
  }
  operand.batch_stride = batch_stride;
  return operand;
}

std::int64_t gemm_result_ld(const Tensor& c) {
  const std::int64_t row_length = std::max<std::int64_t>(c.size(-1), 1);
  return c.size(-2) == 1 ? row_length : c.strides()[c.dim() - 2];
}

}  // namespace kiln
