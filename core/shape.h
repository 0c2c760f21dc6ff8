// Shapes and strides. A Shape lists sizes from the outermost dim to the innermost; strides count
// elements, not bytes. Broadcasting follows NumPy: shapes are aligned at the right, and a size-1
// dim stretches to match.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

using Shape = std::vector<std::int64_t>;

// The element count; a kiln::Error when it overflows int64 (core/checked.h).
std::int64_t numel_of(const Shape& sizes);

// Row-major strides of a dense tensor of these sizes; a kiln::Error when the product of the sizes
// (a size 0 counted as 1) overflows int64.
Shape contiguous_strides(const Shape& sizes);

// The broadcast of two shapes; op names the operation in the error raised when they disagree.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

// Strides that read a tensor of `sizes`/`strides` as if it had shape `target` (the broadcast
// result): stretched dims get stride 0. Requires sizes to broadcast to target.
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);

// Maps a possibly negative dim into [0, ndim); an error naming op otherwise.
int normalize_dim(std::int64_t dim, std::int64_t ndim, std::string_view op);

}  // namespace kiln
