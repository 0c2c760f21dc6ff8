// Storage: a block of device memory shared by a tensor and all of its views. It also holds the
// version counter that in-place ops bump, so views and detach()ed handles share one counter and
// autograd can tell when a tensor saved for backward was modified.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace kiln {

class Backend;

class Storage {
 public:
  Storage(std::size_t nbytes, Device device);  // uninitialised memory from the device's backend
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Backend& backend() const { return *backend_; }

  std::uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Storages alive now (tests check for leaks with it).
  static std::int64_t live_count();

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  Backend* backend_ = nullptr;
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace kiln
