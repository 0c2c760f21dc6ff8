// Row gather (embedding lookup), its deterministic scatter-add backward, and the id check, which
// runs on the device and leaves what it finds for the next synchronisation to raise (memory.cpp),
// so that a training step never waits for it.
//
// scatter_add_rows without atomics: the (id, position) pairs are sorted by id with CUB's radix
// sort, which is stable, so each id's positions stay in increasing order. Each run of equal ids
// (a segment) then belongs to one block, which adds the segment's gradient rows to its table row
// column by column in position order, the order of the CPU backend: the same bits on both.
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/scratch.h"

namespace kiln {

namespace gpu {
namespace {

constexpr std::int64_t kNoInvalidId = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kIdCheckBlocks = 1024;  // fixed, so partial[b] always covers the same ids

// partial[block] = the smallest i with ids[i] outside [0, limit) (and, with `skip`, not equal to
// `ignore`), or kNoInvalidId.
__global__ void __launch_bounds__(kThreads)
    first_invalid_partial(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool skip,
                          std::int64_t ignore, std::int64_t* partial) {
  __shared__ std::int64_t shared[kWarp];
  std::int64_t first = kNoInvalidId;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    if ((ids[i] < 0 || ids[i] >= limit) && !(skip && ids[i] == ignore)) {
      first = i;  // this thread's later ids have larger indices
      break;
    }
  }
  first = block_reduce(first, MinOp{}, kNoInvalidId, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = first;
}

// The smallest of partial (count values), one block: unless the slot already holds an earlier
// check's find, slot = {check, position, id} (CudaBackend::IdCheckSlot).
__global__ void __launch_bounds__(kThreads)
    first_invalid_final(const std::int64_t* partial, std::int64_t count, const std::int64_t* ids,
                        std::int64_t check, std::int64_t* slot) {
  __shared__ std::int64_t shared[kWarp];
  std::int64_t first = kNoInvalidId;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) first = MinOp{}(first, partial[i]);
  first = block_reduce(first, MinOp{}, kNoInvalidId, shared);
  if (threadIdx.x == 0 && first != kNoInvalidId && slot[0] < 0) {
    slot[0] = check;
    slot[1] = first;
    slot[2] = ids[first];
  }
}

// out[i, :] = table[ids[i], :], one block per row; Word is an unsigned type of the dtype's size.
// An id outside [0, rows) (its check reports it at the next synchronisation) gives a row of zeros.
template <typename Word>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const Word* table, std::int64_t rows, std::int64_t cols,
                       const std::int64_t* ids, std::int64_t n, Word* out) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::int64_t id = ids[i];
    Word* dst = out + i * cols;
    if (id < 0 || id >= rows) {
      for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) dst[j] = Word{0};
      continue;
    }
    const Word* src = table + id * cols;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) dst[j] = src[j];
  }
}

// Sort keys: the id, or `rows` for an id outside [0, rows) (a segment add_segments skips).
__global__ void __launch_bounds__(kThreads)
    sort_keys_kernel(const std::int64_t* ids, std::int64_t n, std::int64_t rows,
                     std::uint64_t* keys) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const std::int64_t id = ids[i];
    keys[i] = static_cast<std::uint64_t>(id < 0 || id >= rows ? rows : id);
  }
}

__global__ void __launch_bounds__(kThreads) iota_kernel(std::int32_t* out, std::int64_t n) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count())
    out[i] = static_cast<std::int32_t>(i);
}

// For each segment of equal sorted ids, one block: table_grad[id, :] += grad[position, :] for the
// segment's positions in order. A block whose first entry continues a segment does nothing.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_segments(const T* grad, const std::uint64_t* sorted_ids, const std::int32_t* positions,
                 std::int64_t n, std::int64_t cols, std::int64_t rows, T* table_grad) {
  for (std::int64_t start = blockIdx.x; start < n; start += gridDim.x) {
    const std::uint64_t id = sorted_ids[start];
    if (start > 0 && sorted_ids[start - 1] == id) continue;
    if (id >= static_cast<std::uint64_t>(rows)) continue;  // invalid ids, reported elsewhere
    T* row = table_grad + static_cast<std::int64_t>(id) * cols;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      T acc = row[j];
      for (std::int64_t p = start; p < n && sorted_ids[p] == id; ++p)
        acc += grad[static_cast<std::int64_t>(positions[p]) * cols + j];
      row[j] = acc;
    }
  }
}

}  // namespace
}  // namespace gpu

std::int64_t CudaBackend::find_invalid_id(const IndexArgs& args, const std::int64_t* ids) {
  const std::int64_t n = args.n, limit = args.table_rows;
  if (n == 0) return -1;
  activate();
  const unsigned blocks = gpu::blocks_for(std::min(n, gpu::kIdCheckBlocks * gpu::kThreads));
  Scratch<std::int64_t> partial(*allocator_, blocks);
  KILN_LAUNCH(blocks, gpu::kThreads, stream_, gpu::first_invalid_partial)
  (ids, n, limit, args.targets, args.ignore_index, partial.get());
  KILN_CUDA_CHECK_LAUNCH();
  // Deferred: the find waits in the slot for the next synchronisation (raise_deferred_errors).
  const std::int64_t check = defer_id_check(args.op, limit, args.targets);
  KILN_LAUNCH(1, gpu::kThreads, stream_, gpu::first_invalid_final)
  (partial.get(), blocks, ids, check, id_check_slot());
  KILN_CUDA_CHECK_LAUNCH();
  return -1;
}

void CudaBackend::gather_rows(const IndexArgs& args, const void* table, const std::int64_t* ids,
                              void* out) {
  const std::int64_t n = args.n, cols = args.cols;
  if (n == 0 || cols == 0) return;
  activate();
  const unsigned grid = gpu::blocks_for(n, 1);
  if (dtype_size(args.dtype) == 2) {
    KILN_LAUNCH(grid, gpu::kThreads, stream_, gpu::gather_rows_kernel<std::uint16_t>)
    (static_cast<const std::uint16_t*>(table), args.table_rows, cols, ids, n,
     static_cast<std::uint16_t*>(out));
  } else if (dtype_size(args.dtype) == 4) {
    KILN_LAUNCH(grid, gpu::kThreads, stream_, gpu::gather_rows_kernel<std::uint32_t>)
    (static_cast<const std::uint32_t*>(table), args.table_rows, cols, ids, n,
     static_cast<std::uint32_t*>(out));
  } else {
    KILN_LAUNCH(grid, gpu::kThreads, stream_, gpu::gather_rows_kernel<std::uint64_t>)
    (static_cast<const std::uint64_t*>(table), args.table_rows, cols, ids, n,
     static_cast<std::uint64_t*>(out));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

void CudaBackend::scatter_add_rows(const IndexArgs& args, const void* grad, const std::int64_t* ids,
                                   void* table_grad) {
  const std::int64_t n = args.n, cols = args.cols, table_rows = args.table_rows;
  if (n == 0 || cols == 0) return;
  if (n > std::numeric_limits<std::int32_t>::max())
    gpu::throw_error("scatter_add_rows: " + std::to_string(n) +
                     " ids exceed the CUDA backend's limit of 2^31 - 1");
  activate();
  // The keys are the ids with an invalid one (its deferred check reports it) replaced by
  // table_rows, so they sort as unsigned keys of just enough bits.
  const int end_bit = static_cast<int>(
      std::bit_width(static_cast<std::uint64_t>(std::max<std::int64_t>(table_rows, 1))));
  Scratch<std::uint64_t> keys(*allocator_, n);
  KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::sort_keys_kernel)
  (ids, n, table_rows, keys.get());
  KILN_CUDA_CHECK_LAUNCH();
  const std::uint64_t* keys_in = keys.get();
  Scratch<std::uint64_t> sorted_ids(*allocator_, n);
  Scratch<std::int32_t> positions(*allocator_, n), sorted_positions(*allocator_, n);
  KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::iota_kernel)(positions.get(), n);
  KILN_CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, sorted_ids.get(),
                                                  positions.get(), sorted_positions.get(),
                                                  static_cast<int>(n), 0, end_bit, stream_));
  // At least one byte: a null buffer would make the second call another size query.
  Scratch<unsigned char> temp(*allocator_, std::max<std::int64_t>(temp_bytes, 1));
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in, sorted_ids.get(),
                                                  positions.get(), sorted_positions.get(),
                                                  static_cast<int>(n), 0, end_bit, stream_));
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(gpu::blocks_for(n, 1), gpu::kThreads, stream_, gpu::add_segments<T>)
    (static_cast<const T*>(grad), sorted_ids.get(), sorted_positions.get(), n, cols, table_rows,
     static_cast<T*>(table_grad));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln
