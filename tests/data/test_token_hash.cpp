// TokenHash, the fingerprint the ranks of a data-parallel run compare their corpora by
// (lm/trainer.h): equal for the same ids however they are stored or split into pieces, different
// for the accidents it is there to catch: two lines swapped, a file twice as long, another word.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "data/corpus.h"
#include "data/token_hash.h"

using namespace kiln;

namespace {

template <typename Id>
std::uint64_t hash_of(const std::vector<Id>& ids) {
  TokenHash hash;
  hash.add(std::span<const Id>(ids));
  return hash.value();
}

// The ids of text in one vocabulary (a fresh vocabulary per text would renumber the words of
// swapped lines into the same ids; the vocabulary's own fingerprint covers that case).
std::vector<std::int64_t> ids_of(std::string_view text) {
  static const Vocabulary vocabulary(
      {"<eos>", "the", "cat", "sat", "dog", "ran", "a", "bird", "sang"});
  return tokenize_text_fixed(text, "text", vocabulary).ids;
}

}  // namespace

TEST_CASE("TokenHash fingerprints the ids' values, whatever their width or pieces", "[hash]") {
  const std::vector<std::int64_t> ids = {0, 1, 2, 3, 65535, 7, 7, 1};
  const std::vector<std::uint16_t> narrow(ids.begin(), ids.end());
  const std::vector<std::uint32_t> wide(ids.begin(), ids.end());
  REQUIRE(hash_of(narrow) == hash_of(ids));
  REQUIRE(hash_of(wide) == hash_of(ids));
  // Shard by shard, in order: the same fingerprint as all at once.
  TokenHash pieces;
  pieces.add(std::span<const std::int64_t>(ids).first(3));
  pieces.add(std::span<const std::uint16_t>(narrow).subspan(3));
  REQUIRE(pieces.value() == hash_of(ids));
  REQUIRE(pieces.count() == 8);
  REQUIRE(pieces.hex().size() == 16);
  // The same value each time (ranks on other machines compare it).
  REQUIRE(hash_of(ids) == hash_of(std::vector<std::int64_t>(ids)));
}

TEST_CASE("TokenHash tells apart the corpora that ranks were seen to disagree on", "[hash]") {
  const std::string lines = "the cat sat\nthe dog ran\na bird sang\n";
  const std::string swapped = "the dog ran\nthe cat sat\na bird sang\n";
  std::set<std::uint64_t> seen = {hash_of(ids_of(lines))};
  CHECK(seen.insert(hash_of(ids_of(swapped))).second);              // two lines swapped
  CHECK(seen.insert(hash_of(ids_of(lines + lines))).second);        // a file twice as long
  CHECK(seen.insert(hash_of(ids_of(lines + "\n"))).second);         // one more empty line
  CHECK(seen.insert(hash_of(std::vector<std::int64_t>{})).second);  // nothing
  // Ids that differ in one place, or only in order.
  CHECK(seen.insert(hash_of(std::vector<std::int64_t>{0, 1})).second);
  CHECK(seen.insert(hash_of(std::vector<std::int64_t>{1, 0})).second);
  CHECK(seen.insert(hash_of(std::vector<std::int64_t>{0, 0})).second);
  // Words: another word, or the same bytes cut into other words.
  const auto words = [](std::initializer_list<std::string_view> list) {
    TokenHash hash;
    for (const std::string_view word : list) hash.add_text(word);
    return hash.value();
  };
  CHECK(seen.insert(words({"cat", "dog"})).second);
  CHECK(seen.insert(words({"cat", "dot"})).second);
  CHECK(seen.insert(words({"catdog"})).second);
  CHECK(seen.insert(words({"ca", "tdog"})).second);
  CHECK(words({"cat", "dog"}) == words({"cat", "dog"}));
}
