// CUB's DeviceRadixSort::SortPairs on the CPU (see include/cub/device/device_radix_sort.cuh): a
// least-significant-digit radix sort of 8-bit digits over the key bits [begin_bit, end_bit),
// stable, in device memory, with the caller's temporary storage as the second buffer of each
// pass (so a temporary buffer smaller than the size query said is caught, as a range error).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "cuda_emulator/include/cub/device/device_radix_sort.cuh"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/runtime.h"

namespace kiln::emulator {

namespace {

constexpr std::size_t kTempAlignment = 256;
constexpr int kDigitBits = 8;

std::size_t aligned(std::size_t n) {
  return (n + kTempAlignment - 1) / kTempAlignment * kTempAlignment;
}

std::uint64_t key_at(const unsigned char* keys, std::size_t key_size, long long i) {
  std::uint64_t key = 0;
  std::memcpy(&key, keys + i * key_size, key_size);  // little-endian: the low bytes
  return key;
}

// One stable counting-sort pass by the digit at `shift` of `bits` bits.
void pass(const unsigned char* keys_in, const unsigned char* values_in, unsigned char* keys_out,
          unsigned char* values_out, std::size_t key_size, std::size_t value_size, long long count,
          int shift, int bits) {
  const std::uint64_t digit_mask = (std::uint64_t{1} << bits) - 1;
  std::array<long long, 1 << kDigitBits> start{};
  for (long long i = 0; i < count; ++i)
    ++start[(key_at(keys_in, key_size, i) >> shift) & digit_mask];
  long long sum = 0;
  for (long long& s : start) {
    const long long n = s;
    s = sum;
    sum += n;
  }
  for (long long i = 0; i < count; ++i) {
    const long long to = start[(key_at(keys_in, key_size, i) >> shift) & digit_mask]++;
    std::memcpy(keys_out + to * key_size, keys_in + i * key_size, key_size);
    std::memcpy(values_out + to * value_size, values_in + i * value_size, value_size);
  }
}

}  // namespace

cudaError_t radix_sort_pairs(void* temp, std::size_t& temp_bytes, const void* keys_in,
                             void* keys_out, std::size_t key_size, const void* values_in,
                             void* values_out, std::size_t value_size, long long count,
                             int begin_bit, int end_bit, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  const char* call = "cub::DeviceRadixSort::SortPairs";
  const int key_bits = static_cast<int>(key_size * 8);
  if (count < 0 || begin_bit < 0 || end_bit < begin_bit || end_bit > key_bits)
    return fail_call(cudaErrorInvalidValue,
                     fmt::format("{}: {} items, bits [{}, {}) of {}-bit keys", call, count,
                                 begin_bit, end_bit, key_bits));
  if (!is_valid_stream(stream))
    return fail_call(cudaErrorInvalidResourceHandle,
                     fmt::format("{}: {} is not a stream", call, hex(stream)));
  const std::size_t key_bytes = aligned(static_cast<std::size_t>(count) * key_size);
  const std::size_t value_bytes = aligned(static_cast<std::size_t>(count) * value_size);
  const std::size_t needed = key_bytes + value_bytes + kTempAlignment;
  if (temp == nullptr) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed)
    return fail_call(
        cudaErrorInvalidValue,
        fmt::format("{}: {} bytes of temporary storage, {} needed", call, temp_bytes, needed));
  if (count == 0) return cudaSuccess;
  const std::size_t n = static_cast<std::size_t>(count);
  const std::tuple<const void*, std::size_t, const char*> operands[] = {
      {temp, temp_bytes, "the temporary storage"},
      {keys_in, n * key_size, "d_keys_in"},
      {keys_out, n * key_size, "d_keys_out"},
      {values_in, n * value_size, "d_values_in"},
      {values_out, n * value_size, "d_values_out"}};
  for (const auto& [p, bytes, what] : operands)
    if (const auto problem = check_device_range(p, bytes))
      fatal(fmt::format("{}: {} is not in device memory: {}", call, what, *problem));

  const DeviceAccess access;
  auto* temp_keys = static_cast<unsigned char*>(temp);
  unsigned char* temp_values = temp_keys + key_bytes;
  const int passes = (end_bit - begin_bit + kDigitBits - 1) / kDigitBits;
  if (passes == 0) {
    std::memcpy(keys_out, keys_in, count * key_size);
    std::memcpy(values_out, values_in, count * value_size);
    return cudaSuccess;
  }
  const auto* from_keys = static_cast<const unsigned char*>(keys_in);
  const auto* from_values = static_cast<const unsigned char*>(values_in);
  for (int p = 0; p < passes; ++p) {
    // The last pass writes the outputs; passes alternate between them and the temporary storage.
    const bool to_outputs = (passes - 1 - p) % 2 == 0;
    auto* to_keys = to_outputs ? static_cast<unsigned char*>(keys_out) : temp_keys;
    auto* to_values = to_outputs ? static_cast<unsigned char*>(values_out) : temp_values;
    const int shift = begin_bit + p * kDigitBits;
    const int bits = std::min(kDigitBits, end_bit - shift);
    pass(from_keys, from_values, to_keys, to_values, key_size, value_size, count, shift, bits);
    from_keys = to_keys;
    from_values = to_values;
  }
  return cudaSuccess;
}

}  // namespace kiln::emulator
