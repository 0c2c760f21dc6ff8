// CRC-32 (core/crc32.h): the zlib polynomial's published check values, incremental updates, and
// agreement of the slicing-by-8 loop with the bit-at-a-time definition at every length and
// alignment.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/io/crc32.h"

using namespace kiln;

namespace {

// The definition: one bit at a time, reflected polynomial 0xEDB88320.
std::uint32_t crc32_bitwise(const unsigned char* data, std::size_t size) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) {
    c ^= data[i];
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

}  // namespace

TEST_CASE("crc32 gives zlib's values", "[io][crc32]") {
  const std::string check = "123456789";
  REQUIRE(crc32(check.data(), check.size()) == 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  REQUIRE(crc32(fox.data(), fox.size()) == 0x414FA339u);  // zlib.crc32(b"The quick ...")
  REQUIRE(crc32(nullptr, 0) == 0u);
  const std::vector<unsigned char> zeros(32, 0);
  REQUIRE(crc32(zeros.data(), zeros.size()) == 0x190A55ADu);  // zlib.crc32(bytes(32))
}

TEST_CASE("crc32 continues across pieces and matches the bitwise definition", "[io][crc32]") {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(300);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (std::size_t start = 0; start < 8; ++start) {
    for (std::size_t size = 0; start + size <= bytes.size(); size += 1 + size / 8) {
      const unsigned char* p = bytes.data() + start;
      const std::uint32_t whole = crc32(p, size);
      INFO("start " << start << " size " << size);
      REQUIRE(whole == crc32_bitwise(p, size));
      const std::size_t cut = size / 3;
      REQUIRE(crc32(p + cut, size - cut, crc32(p, cut)) == whole);
    }
  }
}
