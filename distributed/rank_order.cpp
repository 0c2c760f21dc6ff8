#include "distributed/rank_order.h"

#include <algorithm>

#include "core/backend.h"
#include "core/error.h"

namespace kiln::dist {

Share share_of(std::int64_t n, int world_size, int rank) {
  KILN_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size && n >= 0);
  // The first n % world_size shares get one element more.
  const std::int64_t base = n / world_size, extra = n % world_size;
  return {rank * base + std::min<std::int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

void sum_in_rank_order(DType dtype, Device device, std::int64_t count,
                       std::span<const void* const> parts, void* out) {
  KILN_ASSERT(!parts.empty());
  if (count == 0) return;
  Backend& backend = backend_for(device);
  const auto arg = [&](const void* data) {
    return TensorArg{const_cast<void*>(data), dtype, {count}, {1}};
  };
  const TensorArg acc = arg(out);
  if (parts[0] != out) backend.copy(acc, arg(parts[0]));
  for (std::size_t p = 1; p < parts.size(); ++p)
    backend.binary(BinaryOp::add, acc, acc, arg(parts[p]));
}

}  // namespace kiln::dist
