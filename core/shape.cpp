#include "core/shape.h"

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"

namespace kiln {

std::int64_t numel_of(const Shape& sizes) { return checked_product(sizes, "shape"); }

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // The outermost product is computed too: it is the extent a view of the tensor may span.
    stride = checked_mul(stride, std::max<std::int64_t>(sizes[i], 1), "the strides of a shape");
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::int64_t sa = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const std::int64_t sb = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    KILN_CHECK(sa == sb || sa == 1 || sb == 1,
               "{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {})", op, a, b, i, sa, sb);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  KILN_ASSERT(sizes.size() <= target.size());
  const std::size_t lead = target.size() - sizes.size();
  Shape out(target.size(), 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    KILN_ASSERT(sizes[i] == target[lead + i] || sizes[i] == 1);
    out[lead + i] = (sizes[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  }
  return out;
}

int normalize_dim(std::int64_t dim, std::int64_t ndim, std::string_view op) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim;
  const std::int64_t hi = ndim == 0 ? 0 : ndim - 1;
  KILN_CHECK(dim >= lo && dim <= hi,
             "{}: dim {} is out of range for a tensor of {} dims ([{}, {}])", op, dim, ndim, lo,
             hi);
  return static_cast<int>(dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim);
}

}  // namespace kiln
