// XXH64 (Yann Collet's xxHash, 64-bit, as its reference specification defines it): the hash of
// a tokenizer (of its canonical JSON) and of a token shard's ids (data/token_shard.h). Fast
// (several GB/s) so that a shard's hash is checked whenever it is opened; not cryptographic:
// it tells corrupt or mismatched files apart, it does not stop forgeries.
//
//   std::uint64_t h = xxh64(text.data(), text.size());
//   Xxh64 stream;  stream.update(a, n);  stream.update(b, m);  stream.digest();  // == xxh64 of a +
//   b
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

class Xxh64 {
 public:
  explicit Xxh64(std::uint64_t seed = 0);
  void update(const void* data, std::size_t size);
  std::uint64_t digest() const;

 private:
  std::uint64_t acc_[4];
  std::uint64_t seed_;
  std::uint64_t total_ = 0;
  unsigned char buffer_[32];
  std::size_t buffered_ = 0;
};

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed = 0);

// A 64-bit value as 16 lowercase hex digits.
std::string hex64(std::uint64_t value);

}  // namespace kiln
