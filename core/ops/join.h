// Joining and splitting along a dim.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

// The tensors placed one after another along dim; all other dims must agree.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);

// Views of consecutive pieces along dim with the given sizes (which must add up to its size).
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim);
// Views of pieces of `size` along dim (the last may be smaller; an empty dim gives one empty
// piece, as torch.split does).
std::vector<Tensor> split(const Tensor& x, std::int64_t size, std::int64_t dim);

}  // namespace kiln
