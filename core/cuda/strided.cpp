// The error half of strided.h (fmt stays out of the .cu files that build plans).
#include "core/cuda/strided.h"

#include "core/error.h"

namespace kiln {

void fail_too_many_dims(std::string_view op, std::size_t dims, const Shape& sizes) {
  fail(
      "{}: the CUDA backend handles at most {} non-mergeable dims, got {} (shape {}); make the "
      "operands contiguous first",
      op, kMaxDims, dims, sizes);
}

}  // namespace kiln
