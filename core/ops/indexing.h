// Row lookups: index_select along a dim and the embedding lookup built on it. Backward adds
// gradient rows back with a deterministic scatter-add (repeated ids accumulate).
#pragma once

#include "core/tensor.h"

namespace kiln {

// x.select(dim, ids[0]), x.select(dim, ids[1]), ... stacked along dim; ids 1-D int64.
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& ids);

// table (V, D), ids int64 of any shape -> (ids.shape.., D): row ids[i] of the table.
Tensor embedding(const Tensor& table, const Tensor& ids);

}  // namespace kiln
