#include "data/token_hash.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace kiln {

namespace {

// SplitMix64's finaliser (Steele, Lea and Flood, 2014): every input bit reaches every output bit.
std::uint64_t finalise(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t rotate_left(std::uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

// state ← rotl(state ⊕ finalise(x), 23) · ⌊2^64/φ⌋: the rotation and the product make the result
// depend on the order of the words, so swapped lines change it.
std::uint64_t absorb(std::uint64_t state, std::uint64_t x) {
  return rotate_left(state ^ finalise(x), 23) * 0x9e3779b97f4a7c15ULL;
}

}  // namespace

void TokenHash::mix(std::uint64_t x) {
  state_ = absorb(state_, x);
  ++count_;
}

void TokenHash::add_text(std::string_view text) {
  mix(text.size());
  for (std::size_t at = 0; at < text.size(); at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + at, std::min<std::size_t>(8, text.size() - at));
    state_ = absorb(state_, word);
  }
}

std::uint64_t TokenHash::value() const {
  return finalise(state_ ^ static_cast<std::uint64_t>(count_));
}

std::string TokenHash::hex() const { return fmt::format("{:016x}", value()); }

}  // namespace kiln
