// A cache of large freed CPU blocks, reused for later allocations of the same size class. A
// training step allocates the same large buffers every step (activations, the (B T, V) logits,
// gradients); handing them back to the system and faulting fresh pages in again costs a large
// share of a step (PyTorch's reference loses a third of its speed with glibc's malloc instead of
// tcmalloc). Blocks below kMinCachedBytes go straight to malloc, which serves them well.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kiln {

class BlockCache {
 public:
  static constexpr std::size_t kMinCachedBytes = std::size_t{64} << 10;
  static constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;  // idle memory kept at most

  // The size actually allocated for a request: sizes from kMinCachedBytes up are rounded up to
  // one of 8 classes per power of two (at most 12.5% more), so similar sizes share blocks.
  static std::size_t size_class(std::size_t nbytes);

  // A cached block of exactly this class, or null.
  void* take(std::size_t size_class);
  // Keeps a block for reuse; returns false (caller frees it) when the cache is full.
  bool give(void* block, std::size_t size_class);

 private:
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_bytes_ = 0;
};

}  // namespace kiln
