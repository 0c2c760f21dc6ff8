// Temporary device buffers for kernels that need workspace (reduction partials, sort keys and
// values): taken from the device's caching allocator, given back when the scope ends. Giving a
// buffer back while kernels that use it are still queued is safe, because its next user is
// queued behind them on the same stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/caching_allocator.h"

namespace kiln {

template <typename T>
class Scratch {
 public:
  Scratch(CachingAllocator& allocator, std::int64_t count)
      : allocator_(allocator), bytes_(static_cast<std::size_t>(count) * sizeof(T)) {
    if (bytes_ > 0) data_ = static_cast<T*>(allocator_.allocate(bytes_));
  }
  ~Scratch() {
    if (data_ != nullptr) allocator_.deallocate(data_, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T* get() const { return data_; }

 private:
  CachingAllocator& allocator_;
  std::size_t bytes_;
  T* data_ = nullptr;
};

}  // namespace kiln
