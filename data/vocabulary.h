// Vocabulary: the words of a corpus and their ids, in order of first appearance (id 0 is the
// first word seen). This is the order of pytorch/examples' Dictionary, which
// bench/torch_ref.py copies, so kiln and the reference give every word the same id.
//
// Two words are special. "<eos>" ends every line of a corpus. "<unk>" stands for a rare word:
// WikiText-2 already contains it as a literal token. Neither is added in advance: each gets its
// id when it first appears, as in the reference.
//
//   Vocabulary vocab;
//   vocab.add("the");                     // 0
//   vocab.add("cat");                     // 1
//   vocab.add("the");                     // 0 again
//   vocab.word(1);                        // "cat"
//   std::string saved = vocab.to_string();              // "the\ncat", kept in a checkpoint
//   Vocabulary restored = Vocabulary::from_string(saved);  // the same ids
//
// A word is non-empty valid UTF-8 without '\n'. The newline is excluded because a checkpoint
// stores the words joined by "\n".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Vocabulary {
 public:
  static constexpr std::string_view kEos = "<eos>";
  static constexpr std::string_view kUnk = "<unk>";

  Vocabulary() = default;  // empty
  // The words in id order (word i gets id i). A duplicate or an invalid word is an error.
  explicit Vocabulary(const std::vector<std::string>& words);

  // The words joined by "\n" (a checkpoint's "vocab" entry), and back. "" is the empty
  // vocabulary. An empty word (two newlines in a row, or one at the end), a duplicate or
  // invalid UTF-8 is an error.
  std::string to_string() const;
  static Vocabulary from_string(std::string_view joined);

  // The id of word, adding it with the next id if it is new.
  std::int64_t add(std::string_view word);

  std::int64_t size() const { return static_cast<std::int64_t>(words_.size()); }
  bool contains(std::string_view word) const { return find(word).has_value(); }
  // The id of word, or nothing if it is not in the vocabulary.
  std::optional<std::int64_t> find(std::string_view word) const;
  // The id of word; an error naming the word if it is not in the vocabulary.
  std::int64_t id_of(std::string_view word) const;
  // The id of word, or the id of "<unk>" if word is unknown (generation prompts). An error if
  // word is unknown and the vocabulary has no "<unk>".
  std::int64_t id_of_or_unk(std::string_view word) const;
  // The ids of "<eos>" and "<unk>"; an error if the vocabulary lacks them.
  std::int64_t eos() const { return id_of(kEos); }
  std::int64_t unk() const { return id_of(kUnk); }

  // The word with this id; an error if id is outside [0, size()).
  const std::string& word(std::int64_t id) const;
  // Every word, in id order.
  const std::vector<std::string>& words() const { return words_; }

 private:
  // An open-addressing hash table from word to id (linear probing, at most half full). Lookups
  // are most of the time spent reading a corpus, and a flat table of 8-byte slots misses the
  // cache less than std::unordered_map's nodes: WikiText-2 loads in 0.21 s instead of 0.28 s.
  struct Slot {
    std::uint32_t tag;  // the high 32 bits of the word's hash (the low bits pick the slot)
    std::int32_t id;    // -1 when the slot is empty
  };
  // The slot holding word, or the empty slot where it would go. slots_ must not be empty.
  std::size_t slot_of(std::string_view word, std::uint64_t hash) const;
  void grow();

  std::vector<std::string> words_;
  std::vector<Slot> slots_;  // a power of two in size, or empty
};

// A word as error messages show it: quoted, with control bytes and bytes that are not UTF-8
// escaped (\xNN), cut after 40 bytes so that a corrupt multi-megabyte "word" stays readable.
std::string quote_word(std::string_view word);

}  // namespace kiln
