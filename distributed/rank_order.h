// The rank-ordered sum behind SumOrder::rank, shared by the MPI and NCCL backends.
//
// The n elements are cut into world_size contiguous shares; rank r owns share r. Each rank sends
// share p of its buffer to rank p (an all-to-all), sums the world_size copies of its own share in
// rank order, and the summed shares are gathered back to every rank (an allgather). Every element
// is therefore summed once, by one rank, as ((x_0 + x_1) + x_2) + ... — the order one process
// accumulating micro-batch gradients uses — and copied to the others, so the result does not
// depend on the library's algorithm or on which rank does the sum. Each rank sends and receives
// 2 (N - 1) / N of the buffer, as a ring allreduce does.
#pragma once

#include <cstdint>
#include <span>

#include "core/device.h"
#include "core/dtype.h"

namespace kiln::dist {

struct Share {
  std::int64_t offset = 0, count = 0;
};

// Rank r's share of n elements: contiguous, in rank order, sizes differing by at most one.
Share share_of(std::int64_t n, int world_size, int rank);

// out = ((parts[0] + parts[1]) + parts[2]) + ... elementwise over count elements of dtype on
// device, with Backend::binary add (the kernel that accumulates gradients into .grad). out may be
// parts[0]; no other part may overlap out.
void sum_in_rank_order(DType dtype, Device device, std::int64_t count,
                       std::span<const void* const> parts, void* out);

}  // namespace kiln::dist
