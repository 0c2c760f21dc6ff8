// Reductions along dims. Sums are deterministic: each output element is accumulated by one
// thread in index order (float32 accumulates in float64). A bf16 x is reduced in float32 and
// gives a float32 result.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

// Sum over `dims` (all dims when empty); keepdim leaves them as size 1.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// The largest value along dim and its index (the first one on ties). The gradient flows to the
// returned index only.
struct MaxResult {
  Tensor values;
  Tensor indices;  // int64
};
MaxResult max(const Tensor& x, std::int64_t dim, bool keepdim = false);

// Reduces a gradient of a broadcast result back to `shape` (sums the stretched dims); a bf16 x
// gives float32 like every reduction, also when its shape is already `shape`.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace kiln
