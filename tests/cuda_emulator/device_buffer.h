// A cudaMalloc'd array for the emulator's tests, copied from and to the host with cudaMemcpy.
#pragma once

#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

namespace kiln::testing {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    REQUIRE(cudaMalloc(&data_, count * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) {
    REQUIRE(cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> values(count_);
    REQUIRE(cudaMemcpy(values.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    return values;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

}  // namespace kiln::testing
