// kiln's CUDA emulator: CUB's DeviceRadixSort::SortPairs on the CPU (cuda_emulator/
// radix_sort.cpp), with CUB's contract: a first call with no temporary storage asks its size; the
// sort is stable and orders by the key bits [begin_bit, end_bit) only; the inputs are not
// modified. Unsigned integer keys, as kiln sorts.
#pragma once

#include <cstddef>
#include <type_traits>

#include "cuda_emulator/include/cuda_runtime_api.h"

namespace kiln::emulator {

cudaError_t radix_sort_pairs(void* temp, std::size_t& temp_bytes, const void* keys_in,
                             void* keys_out, std::size_t key_size, const void* values_in,
                             void* values_out, std::size_t value_size, long long count,
                             int begin_bit, int end_bit, cudaStream_t stream);

}  // namespace kiln::emulator

namespace cub {

struct DeviceRadixSort {
  template <typename KeyT, typename ValueT, typename NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, std::size_t& temp_storage_bytes,
                               const KeyT* d_keys_in, KeyT* d_keys_out, const ValueT* d_values_in,
                               ValueT* d_values_out, NumItemsT num_items, int begin_bit = 0,
                               int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_integral_v<KeyT> && std::is_unsigned_v<KeyT> && sizeof(KeyT) <= 8,
                  "the emulated SortPairs takes unsigned integer keys");
    static_assert(std::is_trivially_copyable_v<ValueT>);
    return ::kiln::emulator::radix_sort_pairs(d_temp_storage, temp_storage_bytes, d_keys_in,
                                              d_keys_out, sizeof(KeyT), d_values_in, d_values_out,
                                              sizeof(ValueT), static_cast<long long>(num_items),
                                              begin_bit, end_bit, stream);
  }
};

}  // namespace cub
