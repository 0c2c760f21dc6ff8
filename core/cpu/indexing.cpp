// Row gather (embedding lookup) and its deterministic scatter-add backward.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"

namespace kiln {

std::int64_t CpuBackend::find_invalid_id(const IndexArgs& args, const std::int64_t* ids) {
  const std::int64_t n = args.n, limit = args.table_rows;
  for (std::int64_t i = 0; i < n; ++i)
    if ((ids[i] < 0 || ids[i] >= limit) && !(args.targets && ids[i] == args.ignore_index)) return i;
  return -1;
}

void CpuBackend::gather_rows(const IndexArgs& args, const void* table, const std::int64_t* ids,
                             void* out) {
  const std::int64_t n = args.n, cols = args.cols;
  const std::size_t row_bytes = cols * dtype_size(args.dtype);
  const char* src = static_cast<const char*>(table);
  char* dst = static_cast<char*>(out);
  parallel_tasks(n, n * cols, [&](std::int64_t i) {
    std::memcpy(dst + i * row_bytes, src + ids[i] * row_bytes, row_bytes);
  });
}

// Sorting positions by id (stable) gives each table row its contributions in position order;
// a task owns whole rows, so no two tasks write the same row.
void CpuBackend::scatter_add_rows(const IndexArgs& args, const void* grad, const std::int64_t* ids,
                                  void* table_grad) {
  const std::int64_t n = args.n, cols = args.cols;
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
  std::vector<std::int64_t> segment_starts;
  for (std::int64_t i = 0; i < n; ++i)
    if (i == 0 || ids[order[i]] != ids[order[i - 1]]) segment_starts.push_back(i);
  segment_starts.push_back(n);
  const std::int64_t segments = static_cast<std::int64_t>(segment_starts.size()) - 1;
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad);
    T* table = static_cast<T*>(table_grad);
    parallel_tasks(segments, n * cols, [&](std::int64_t s) {
      T* row = table + ids[order[segment_starts[s]]] * cols;
      for (std::int64_t i = segment_starts[s]; i < segment_starts[s + 1]; ++i) {
        const T* src = g + order[i] * cols;
        for (std::int64_t j = 0; j < cols; ++j) row[j] += src[j];
      }
    });
  });
}

}  // namespace kiln
