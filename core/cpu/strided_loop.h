// The loop behind every elementwise CPU kernel. Operands are strided views of one iteration
// shape; dims of size 1 are dropped and adjacent dims that are contiguous for every operand are
// merged, so most calls become one flat loop. The body receives runs along the innermost dim:
// body(n, offsets, strides) with each operand's first element offset and its inner stride.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/shape.h"

namespace kiln {

template <int N>
struct StridedGeometry {
  std::vector<std::int64_t> sizes;
  std::array<std::vector<std::int64_t>, N> strides;
};

template <int N>
StridedGeometry<N> collapse_dims(const Shape& sizes, const std::array<const Shape*, N>& strides) {
  StridedGeometry<N> g;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    const bool mergeable = !g.sizes.empty() && [&] {
      for (int k = 0; k < N; ++k)
        if (g.strides[k].back() != (*strides[k])[d] * sizes[d]) return false;
      return true;
    }();
    if (mergeable) {
      g.sizes.back() *= sizes[d];
      for (int k = 0; k < N; ++k) g.strides[k].back() = (*strides[k])[d];
    } else {
      g.sizes.push_back(sizes[d]);
      for (int k = 0; k < N; ++k) g.strides[k].push_back((*strides[k])[d]);
    }
  }
  return g;
}

// Calls body(n, offsets, inner_strides) over every run of the collapsed iteration space.
template <int N, typename Body>
void for_each_run(const Shape& sizes, const std::array<const Shape*, N>& strides, Body&& body) {
  for (std::int64_t s : sizes)
    if (s == 0) return;
  const StridedGeometry<N> g = collapse_dims<N>(sizes, strides);
  std::array<std::int64_t, N> inner_strides{};
  if (g.sizes.empty()) {
    body(std::int64_t{1}, std::array<std::int64_t, N>{}, inner_strides);
    return;
  }
  const std::size_t nd = g.sizes.size();
  const std::int64_t inner = g.sizes[nd - 1];
  for (int k = 0; k < N; ++k) inner_strides[k] = g.strides[k][nd - 1];
  std::int64_t outer = 1;
  for (std::size_t d = 0; d + 1 < nd; ++d) outer *= g.sizes[d];

  if (outer == 1) {  // one long run: split it into chunks
    constexpr std::int64_t kChunk = 16384;
    parallel_chunks(inner, kChunk, [&](std::int64_t begin, std::int64_t end) {
      std::array<std::int64_t, N> offsets;
      for (int k = 0; k < N; ++k) offsets[k] = begin * inner_strides[k];
      body(end - begin, offsets, inner_strides);
    });
    return;
  }
  parallel_tasks(outer, outer * inner, [&](std::int64_t row) {
    std::array<std::int64_t, N> offsets{};
    std::int64_t rest = row;
    for (std::size_t d = nd - 1; d-- > 0;) {
      const std::int64_t i = rest % g.sizes[d];
      rest /= g.sizes[d];
      for (int k = 0; k < N; ++k) offsets[k] += i * g.strides[k][d];
    }
    body(inner, offsets, inner_strides);
  });
}

}  // namespace kiln
