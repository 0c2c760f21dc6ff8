#include "data/xxhash64.h"

#include <cstring>

#include <fmt/format.h>

namespace kiln {

namespace {

constexpr std::uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL,
                        P3 = 0x165667B19E3779F9ULL, P4 = 0x85EBCA77C2B2AE63ULL,
                        P5 = 0x27D4EB2F165667C5ULL;

inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline std::uint64_t read64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, AArch64)
}

inline std::uint32_t read32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline std::uint64_t round(std::uint64_t acc, std::uint64_t input) {
  acc += input * P2;
  return rotl(acc, 31) * P1;
}

inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t value) {
  acc ^= round(0, value);
  return acc * P1 + P4;
}

}  // namespace

Xxh64::Xxh64(std::uint64_t seed) : acc_{seed + P1 + P2, seed + P2, seed, seed - P1}, seed_(seed) {}

void Xxh64::update(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (buffered_ + size < 32) {
    std::memcpy(buffer_ + buffered_, p, size);
    buffered_ += size;
    return;
  }
  if (buffered_ > 0) {
    const std::size_t fill = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    for (int k = 0; k < 4; ++k) acc_[k] = round(acc_[k], read64(buffer_ + 8 * k));
    p += fill;
    size -= fill;
    buffered_ = 0;
  }
  for (; size >= 32; p += 32, size -= 32) {
    for (int k = 0; k < 4; ++k) acc_[k] = round(acc_[k], read64(p + 8 * k));
  }
  std::memcpy(buffer_, p, size);
  buffered_ = size;
}

std::uint64_t Xxh64::digest() const {
  std::uint64_t h;
  if (total_ >= 32) {
    h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
    for (int k = 0; k < 4; ++k) h = merge_round(h, acc_[k]);
  } else {
    h = seed_ + P5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  std::size_t left = buffered_;
  for (; left >= 8; p += 8, left -= 8) h = rotl(h ^ round(0, read64(p)), 27) * P1 + P4;
  if (left >= 4) {
    h = rotl(h ^ (static_cast<std::uint64_t>(read32(p)) * P1), 23) * P2 + P3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) h = rotl(h ^ (*p * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed) {
  Xxh64 hash(seed);
  hash.update(data, size);
  return hash.digest();
}

std::string hex64(std::uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace kiln
