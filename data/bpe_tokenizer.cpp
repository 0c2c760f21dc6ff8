#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/unicode_classes.h"
#include "data/vocabulary.h"

namespace kiln {

namespace {

constexpr std::uint32_t kNoRank = std::numeric_limits<std::uint32_t>::max();
// Pieces up to this many bytes merge by scanning their pairs; longer ones with a heap.
constexpr std::size_t kShortPiece = 256;
// Pieces up to this many bytes are cached.
constexpr std::size_t kCachedPiece = 64;

inline std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}

inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  return x;
}

// A fast hash of a short piece of text (8 bytes at a time).
inline std::uint64_t piece_hash(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = mix((h ^ tail) * 0x9E3779B185EBCA87ULL);
  return h == 0 ? 1 : h;
}

}  // namespace

// The ids of the distinct pieces met so far in one encode call (WikiText-2 has about 70,000
// distinct pieces: most pieces of a text are found here), and scratch space for merging.
class BpeTokenizer::Cache {
 public:
  Cache() : slots_(kSlots) {}

  // The ids of piece, or nullptr.
  const std::int32_t* find(std::string_view piece, std::uint64_t hash, std::uint32_t& count) {
    for (std::size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Entry& e = slots_[i];
      if (e.hash == 0) return nullptr;
      if (e.hash == hash && e.word_length == piece.size() &&
          std::memcmp(words_.data() + e.word_begin, piece.data(), piece.size()) == 0) {
        count = e.ids_length;
        return ids_.data() + e.ids_begin;
      }
    }
  }

  void insert(std::string_view piece, std::uint64_t hash, const std::vector<std::int32_t>& ids) {
    if (2 * (used_ + 1) > kSlots) {  // full: start afresh
      std::fill(slots_.begin(), slots_.end(), Entry{});
      words_.clear();
      ids_.clear();
      used_ = 0;
    }
    std::size_t i = hash & (kSlots - 1);
    while (slots_[i].hash != 0) i = (i + 1) & (kSlots - 1);
    slots_[i] = Entry{
        hash, static_cast<std::uint32_t>(words_.size()), static_cast<std::uint32_t>(piece.size()),
        static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint32_t>(ids.size())};
    words_.append(piece);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++used_;
  }

  std::vector<std::int32_t> symbols;  // the piece being merged
  std::vector<std::uint32_t> ranks;   // ranks[i]: the rank of merging symbols i and i + 1

 private:
  static constexpr std::size_t kSlots = std::size_t{1} << 18;
  struct Entry {
    std::uint64_t hash = 0;
    std::uint32_t word_begin = 0, word_length = 0, ids_begin = 0, ids_length = 0;
  };
  std::vector<Entry> slots_;
  std::string words_;
  std::vector<std::int32_t> ids_;
  std::size_t used_ = 0;
};

BpeTokenizer::BpeTokenizer(std::vector<std::string> symbols, std::vector<Merge> merges,
                           std::vector<AddedToken> added, bool ignore_merges)
    : symbols_(std::move(symbols)),
      merges_(std::move(merges)),
      added_(std::move(added)),
      ignore_merges_(ignore_merges) {
  const auto n = static_cast<std::int64_t>(symbols_.size());
  KILN_CHECK(n <= std::numeric_limits<std::int32_t>::max(), "bpe: {} tokens are too many", n);
  std::vector<bool> is_added(symbols_.size(), false);
  for (const AddedToken& a : added_) {
    KILN_CHECK(a.id >= 0 && a.id < n, "bpe: added token {} has id {}, outside [0, {})",
               quote_word(a.content), a.id, n);
    KILN_CHECK(!a.content.empty(), "bpe: added token {} is empty", a.id);
    KILN_CHECK(symbols_[a.id] == a.content,
               "bpe: added token {} has id {}, which the vocabulary gives to {}",
               quote_word(a.content), a.id, quote_word(symbols_[a.id]));
    is_added[a.id] = true;
  }
  // Each token's bytes: byte-level symbols decoded; an added token (or a token not written in
  // byte symbols, which no merge can make) stands for its text.
  bytes_.resize(symbols_.size());
  std::unordered_map<std::string_view, std::int32_t> id_of;
  std::vector<bool> byte_level(symbols_.size(), false);
  for (std::size_t id = 0; id < symbols_.size(); ++id) {
    const std::string& s = symbols_[id];
    KILN_CHECK(!s.empty(), "bpe: token {} is empty", id);
    const auto [it, inserted] = id_of.emplace(s, static_cast<std::int32_t>(id));
    KILN_CHECK(inserted, "bpe: token {} appears twice (ids {} and {})", quote_word(s), it->second,
               id);
    if (!is_added[id] && symbols_to_bytes(s, bytes_[id])) {
      byte_level[id] = true;
    } else {
      bytes_[id] = s;
    }
  }
  std::vector<bool> made(symbols_.size(), false);
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(byte_symbol(static_cast<std::uint8_t>(b)), symbol);
    const auto it = id_of.find(symbol);
    KILN_CHECK(it != id_of.end() && byte_level[it->second],
               "bpe: the vocabulary lacks the token of byte 0x{:02x} ('{}'): a byte-level BPE "
               "vocabulary holds all 256",
               b, symbol);
    byte_ids_[b] = it->second;
    made[it->second] = true;
  }
  // The merge table, each merge checked: its tokens are made before it, and it makes their join.
  std::size_t slots = 16;
  while (slots < 2 * merges_.size() + 2) slots *= 2;
  table_.assign(slots, Slot{kEmpty, 0, 0});
  for (std::size_t k = 0; k < merges_.size(); ++k) {
    const Merge& m = merges_[k];
    for (const std::int32_t id : {m.left, m.right, m.result})
      KILN_CHECK(id >= 0 && id < n, "bpe: merge {} names token {}, outside [0, {})", k, id, n);
    for (const std::int32_t id : {m.left, m.right})
      KILN_CHECK(made[id],
                 "bpe: merge {} ({} {}) uses {}, which neither a byte nor an earlier merge makes "
                 "(the merges form a cycle or are out of order)",
                 k, quote_word(symbols_[m.left]), quote_word(symbols_[m.right]),
                 quote_word(symbols_[id]));
    KILN_CHECK(symbols_[m.result] == symbols_[m.left] + symbols_[m.right],
               "bpe: merge {} ({} {}) makes {}, not their join", k, quote_word(symbols_[m.left]),
               quote_word(symbols_[m.right]), quote_word(symbols_[m.result]));
    const std::uint64_t key = pair_key(m.left, m.right);
    std::size_t i = mix(key) & (slots - 1);
    while (table_[i].key != kEmpty && table_[i].key != key) i = (i + 1) & (slots - 1);
    KILN_CHECK(table_[i].key == kEmpty, "bpe: merge {} ({} {}) repeats merge {}", k,
               quote_word(symbols_[m.left]), quote_word(symbols_[m.right]), table_[i].rank);
    table_[i] = Slot{key, static_cast<std::uint32_t>(k), m.result};
    made[m.result] = true;
  }
  if (ignore_merges_)
    for (std::size_t id = 0; id < symbols_.size(); ++id)
      if (byte_level[id]) whole_.emplace(bytes_[id], static_cast<std::int32_t>(id));
}

const BpeTokenizer::Slot* BpeTokenizer::find_merge(std::int32_t left, std::int32_t right) const {
  const std::uint64_t key = pair_key(left, right);
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    const Slot& slot = table_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmpty) return nullptr;
  }
}

const std::string& BpeTokenizer::token_bytes(std::int64_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size(), "bpe: id {} is out of range [0, {})", id, vocab_size());
  return bytes_[static_cast<std::size_t>(id)];
}

// The lowest-ranked pair, leftmost among equals, merged until none is left: ranks[] holds each
// adjacent pair's rank, so a merge looks up only the two pairs it changes.
void BpeTokenizer::merge_short(std::vector<std::int32_t>& s, Cache& cache) const {
  std::vector<std::uint32_t>& ranks = cache.ranks;
  const auto rank_of = [&](std::size_t i) {
    const Slot* slot = find_merge(s[i], s[i + 1]);
    return slot ? slot->rank : kNoRank;
  };
  ranks.resize(s.size() - 1);
  for (std::size_t i = 0; i + 1 < s.size(); ++i) ranks[i] = rank_of(i);
  while (!ranks.empty()) {
    const auto best = std::min_element(ranks.begin(), ranks.end());
    if (*best == kNoRank) break;
    const auto i = static_cast<std::size_t>(best - ranks.begin());
    s[i] = merges_[*best].result;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    ranks.erase(best);
    if (i > 0) ranks[i - 1] = rank_of(i - 1);
    if (i < ranks.size()) ranks[i] = rank_of(i);
  }
}

// The same merges with a heap of (rank, position) and a linked list: O(m log m) for m symbols.
void BpeTokenizer::merge_long(std::vector<std::int32_t>& s) const {
  const auto m = static_cast<std::int64_t>(s.size());
  std::vector<std::int64_t> prev(s.size()), next(s.size());
  for (std::int64_t i = 0; i < m; ++i) prev[i] = i - 1, next[i] = i + 1 < m ? i + 1 : -1;
  using Entry = std::pair<std::uint32_t, std::int64_t>;  // (rank, position): smallest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  const auto push = [&](std::int64_t i) {
    if (i < 0 || next[i] < 0) return;
    if (const Slot* slot = find_merge(s[i], s[next[i]])) heap.emplace(slot->rank, i);
  };
  for (std::int64_t i = 0; i + 1 < m; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    // Stale entries: a merged-away position, or a pair that has changed since.
    if (s[i] < 0 || next[i] < 0) continue;
    const Slot* slot = find_merge(s[i], s[next[i]]);
    if (slot == nullptr || slot->rank != rank) continue;
    const std::int64_t j = next[i];
    s[i] = slot->result;
    s[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  s.erase(std::remove(s.begin(), s.end(), -1), s.end());
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::int64_t>& ids,
                                Cache& cache) const {
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const bool cached = piece.size() <= kCachedPiece;
  const std::uint64_t hash = cached ? piece_hash(piece) : 0;
  if (cached) {
    std::uint32_t count = 0;
    if (const std::int32_t* found = cache.find(piece, hash, count)) {
      ids.insert(ids.end(), found, found + count);
      return;
    }
  }
  std::vector<std::int32_t>& s = cache.symbols;
  s.clear();
  const auto whole = ignore_merges_ ? whole_.find(std::string(piece)) : whole_.end();
  if (whole != whole_.end()) {
    s.push_back(whole->second);
  } else {
    for (const char c : piece) s.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    if (s.size() <= kShortPiece) {
      merge_short(s, cache);
    } else {
      merge_long(s);
    }
  }
  ids.insert(ids.end(), s.begin(), s.end());
  if (cached) cache.insert(piece, hash, s);
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<std::int64_t>& ids) const {
  Cache cache;
  ids.reserve(ids.size() + text.size() / 4);
  for_each_piece(text, [&](std::size_t begin, std::size_t end, std::int32_t added) {
    if (added >= 0) {
      ids.push_back(added);
    } else {
      encode_piece(text.substr(begin, end - begin), ids, cache);
    }
  });
}

void BpeTokenizer::decode_append(std::span<const std::int64_t> ids, std::string& out) const {
  for (const std::int64_t id : ids) out += token_bytes(id);
}

namespace {

// The start of a UTF-8 sequence that the text's end begins but does not finish, or text.size().
std::size_t incomplete_utf8_start(std::string_view text) {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if (c < 0x80) break;
    if (c >= 0xC0) {
      const std::size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      return length > back ? text.size() - back : text.size();
    }
  }
  return text.size();
}

}  // namespace

bool BpeTokenizer::may_span_added(std::string_view text, std::size_t p) const {
  for (const AddedToken& a : added_) {
    const std::size_t length = a.content.size();
    for (std::size_t at = p >= length ? p - length + 1 : 0; at < p; ++at) {
      const std::size_t held = std::min(length, text.size() - at);
      if (text.compare(at, held, a.content, 0, held) == 0) return true;
    }
  }
  return false;
}

std::size_t BpeTokenizer::partial_added_start(std::string_view text) const {
  std::size_t start = text.size();
  for (const AddedToken& a : added_) {
    const std::size_t length = a.content.size();
    for (std::size_t at = text.size() >= length ? text.size() - length + 1 : 0; at < start; ++at)
      if (text.compare(at, std::string_view::npos, a.content, 0, text.size() - at) == 0) {
        start = at;
        break;
      }
  }
  return start;
}

std::size_t BpeTokenizer::next_cut(std::string_view text, std::size_t from) const {
  for (std::size_t p = std::max<std::size_t>(from, 1); p < text.size(); ++p)
    if (is_fixed_boundary(text, p) && !may_span_added(text, p)) return p;
  return text.size();
}

std::size_t BpeTokenizer::last_cut(std::string_view text) const {
  for (std::size_t p = text.size(); p-- > 1;)
    if (is_fixed_boundary(text, p) && !may_span_added(text, p)) return p;
  // No fixed boundary (a block of spaces, or of one script without spaces). The scanner settles
  // where a piece ends by reading at most up to the end of the piece after it (a run's first
  // character of another class, the letter after "'r" that is not "e", the non-space after a run
  // of spaces), so every piece but the last ends where the whole text's does: the start of the
  // second-to-last piece is a cut, and the start of the last one is not ("'r" may become "'re").
  // A character that the text's end only begins may be of another class, and an added token
  // that it only begins may end the text's last stretch early, so the pieces are those of the
  // text before either.
  const std::size_t settled = std::min(partial_added_start(text), incomplete_utf8_start(text));
  std::vector<std::size_t> starts;
  for_each_piece(text.substr(0, settled),
                 [&](std::size_t begin, std::size_t, std::int32_t) { starts.push_back(begin); });
  for (std::size_t k = starts.size() >= 2 ? starts.size() - 2 : 0; k >= 1; --k)
    if (!may_span_added(text, starts[k])) return starts[k];
  return 0;
}

std::string BpeTokenizer::token_label(std::int64_t id) const {
  return printable_text(token_bytes(id));
}

}  // namespace kiln
