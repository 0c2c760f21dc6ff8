#include "core/storage.h"

#include "core/backend.h"

namespace kiln {

namespace {
std::atomic<std::int64_t> live_storages{0};
}

Storage::Storage(std::size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), backend_(&backend_for(device)) {
  data_ = nbytes == 0 ? nullptr : backend_->allocate(nbytes);
  live_storages.fetch_add(1, std::memory_order_relaxed);
}

Storage::~Storage() {
  if (data_ != nullptr) backend_->deallocate(data_, nbytes_);
  live_storages.fetch_sub(1, std::memory_order_relaxed);
}

std::int64_t Storage::live_count() { return live_storages.load(); }

}  // namespace kiln
