// The iteration plan of an elementwise CUDA kernel, built on the host. Operands are strided views
// of one iteration shape; dims of size 1 are dropped and adjacent dims that are contiguous for
// every operand are merged (as core/cpu/strided_loop.h does), so a contiguous or a simply
// broadcast call becomes one flat dim. What remains, at most kMaxDims dims, travels to the kernel
// by value: sizes and per-operand strides in elements, outermost dim first.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/shape.h"

namespace kiln {

constexpr int kMaxDims = 8;

template <int N>
struct StridedPlan {
  int ndim = 1;            // at least 1: a single element is one dim of size 1 with stride 0
  std::int64_t numel = 0;  // 0: nothing to do
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};
};

// Throws a kiln::Error naming op: the call still has `dims` dims of `sizes` after collapsing.
[[noreturn]] void fail_too_many_dims(std::string_view op, std::size_t dims, const Shape& sizes);

// The plan for `sizes` with each operand's strides (operand 0 is the output).
template <int N>
StridedPlan<N> plan_strided(std::string_view op, const Shape& sizes,
                            const std::array<const Shape*, N>& strides) {
  StridedPlan<N> plan;
  plan.numel = 1;
  for (std::int64_t s : sizes) plan.numel *= s;
  if (plan.numel == 0) return plan;
  std::vector<std::int64_t> kept_sizes;
  std::array<std::vector<std::int64_t>, N> kept_strides;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool mergeable = !kept_sizes.empty();
    for (int k = 0; k < N && mergeable; ++k)
      mergeable = kept_strides[k].back() == (*strides[k])[d] * sizes[d];
    if (mergeable) {
      kept_sizes.back() *= sizes[d];
      for (int k = 0; k < N; ++k) kept_strides[k].back() = (*strides[k])[d];
    } else {
      kept_sizes.push_back(sizes[d]);
      for (int k = 0; k < N; ++k) kept_strides[k].push_back((*strides[k])[d]);
    }
  }
  if (kept_sizes.size() > static_cast<std::size_t>(kMaxDims))
    fail_too_many_dims(op, kept_sizes.size(), sizes);
  if (kept_sizes.empty()) {
    plan.sizes[0] = 1;
    return plan;
  }
  plan.ndim = static_cast<int>(kept_sizes.size());
  for (int d = 0; d < plan.ndim; ++d) {
    plan.sizes[d] = kept_sizes[d];
    for (int k = 0; k < N; ++k) plan.strides[k][d] = kept_strides[k][d];
  }
  return plan;
}

}  // namespace kiln
