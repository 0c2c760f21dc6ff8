#include "core/cpu/block_cache.h"

#include <bit>

namespace kiln {

std::size_t BlockCache::size_class(std::size_t nbytes) {
  if (nbytes < kMinCachedBytes) return (nbytes + 63) / 64 * 64;
  const std::size_t step = std::bit_floor(nbytes) / 8;
  return (nbytes + step - 1) / step * step;
}

void* BlockCache::take(std::size_t size_class) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_.find(size_class);
  if (it == free_.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  cached_bytes_ -= size_class;
  return block;
}

bool BlockCache::give(void* block, std::size_t size_class) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_bytes_ + size_class > kMaxCachedBytes) return false;
  free_[size_class].push_back(block);
  cached_bytes_ += size_class;
  return true;
}

}  // namespace kiln
