#include "data/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/pretokenizer.h"
#include "data/unicode_classes.h"

namespace kiln {

namespace {

using Pair = std::uint64_t;  // left << 32 | right

inline Pair make_pair(std::int32_t left, std::int32_t right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}
inline std::int32_t left_of(Pair p) { return static_cast<std::int32_t>(p >> 32); }
inline std::int32_t right_of(Pair p) { return static_cast<std::int32_t>(p & 0xFFFFFFFFu); }

struct Piece {
  std::vector<std::int32_t> symbols;
  std::int64_t count;
};

// A candidate merge in the heap: the most frequent first, then the lower pair.
struct Candidate {
  std::int64_t count;
  Pair pair;
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainOptions options) : options_(options) {
  KILN_CHECK(options_.vocab_size >= 256 && options_.vocab_size < (std::int64_t{1} << 31),
             "bpe training: vocab_size {} must be at least 256 (the bytes)", options_.vocab_size);
  KILN_CHECK(options_.min_frequency >= 1, "bpe training: min_frequency {} must be at least 1",
             options_.min_frequency);
}

void BpeTrainer::add_text(std::string_view text) {
  const int threads = std::max(1, options_.threads);
  const int parts = text.size() < (std::size_t{1} << 20) ? 1 : threads;
  // Parts cut at fixed boundaries, each counted on its own thread, then summed.
  std::vector<std::size_t> starts{0};
  for (int t = 1; t < parts; ++t) {
    std::size_t p = std::max(starts.back(), text.size() / static_cast<std::size_t>(parts) * t);
    while (p < text.size() && !is_fixed_boundary(text, p)) ++p;
    starts.push_back(std::min(p, text.size()));
  }
  starts.push_back(text.size());
  std::vector<std::unordered_map<std::string, std::int64_t>> counts(
      static_cast<std::size_t>(parts));
  std::vector<std::int64_t> pieces(static_cast<std::size_t>(parts), 0);
  run_parts(parts, threads, [&](int t) {
    const std::string_view part = text.substr(starts[t], starts[t + 1] - starts[t]);
    auto& local = counts[t];
    for (std::size_t i = 0; i < part.size();) {
      const std::size_t end = pretoken_end(part, i);
      ++local[std::string(part.substr(i, end - i))];
      ++pieces[t];
      i = end;
    }
  });
  for (int t = 0; t < parts; ++t) {
    for (auto& [piece, count] : counts[t]) counts_[piece] += count;
    pieces_ += pieces[t];
  }
}

BpeTokenizer BpeTrainer::train() const {
  KILN_CHECK(!counts_.empty(), "bpe training: no text to learn from");
  // The 256 bytes, ordered by their symbols' code points (GPT-2's and tokenizers' order).
  std::vector<int> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = b;
  std::sort(bytes.begin(), bytes.end(), [](int a, int b) {
    return byte_symbol(static_cast<std::uint8_t>(a)) < byte_symbol(static_cast<std::uint8_t>(b));
  });
  std::vector<std::string> token_bytes;  // each id's bytes
  std::unordered_map<std::string, std::int32_t> id_of;
  std::int32_t byte_id[256];
  for (int b : bytes) {
    byte_id[b] = static_cast<std::int32_t>(token_bytes.size());
    id_of.emplace(std::string(1, static_cast<char>(b)), byte_id[b]);
    token_bytes.emplace_back(1, static_cast<char>(b));
  }

  // The distinct pieces, in byte order (the result does not depend on it; determinism does).
  std::vector<std::pair<std::string_view, std::int64_t>> sorted;
  sorted.reserve(counts_.size());
  for (const auto& [piece, count] : counts_) sorted.emplace_back(piece, count);
  std::sort(sorted.begin(), sorted.end());
  std::vector<Piece> pieces;
  pieces.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    Piece p{{}, count};
    for (const char c : piece) p.symbols.push_back(byte_id[static_cast<unsigned char>(c)]);
    pieces.push_back(std::move(p));
  }

  // Pair counts over all pieces, and the pieces that hold each pair (perhaps listed twice).
  std::unordered_map<Pair, std::int64_t> pair_count;
  std::unordered_map<Pair, std::vector<std::uint32_t>> where;
  for (std::size_t w = 0; w < pieces.size(); ++w) {
    const Piece& p = pieces[w];
    for (std::size_t i = 0; i + 1 < p.symbols.size(); ++i) {
      const Pair pair = make_pair(p.symbols[i], p.symbols[i + 1]);
      pair_count[pair] += p.count;
      std::vector<std::uint32_t>& list = where[pair];
      if (list.empty() || list.back() != w) list.push_back(static_cast<std::uint32_t>(w));
    }
  }
  std::priority_queue<Candidate> heap;
  for (const auto& [pair, count] : pair_count) heap.push({count, pair});

  std::vector<std::string> symbols;
  std::vector<BpeTokenizer::Merge> merges;
  std::vector<std::uint32_t> seen(pieces.size(), 0);  // the last merge that visited a piece
  std::vector<Pair> changed;
  while (static_cast<std::int64_t>(token_bytes.size()) < options_.vocab_size && !heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const auto it = pair_count.find(top.pair);
    const std::int64_t count = it == pair_count.end() ? 0 : it->second;
    if (count != top.count) {  // stale: counts fell since it was pushed
      if (count > 0) heap.push({count, top.pair});
      continue;
    }
    if (count < options_.min_frequency) break;
    const std::int32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string joined = token_bytes[a] + token_bytes[b];
    std::int32_t result;
    if (const auto found = id_of.find(joined); found != id_of.end()) {
      result = found->second;
    } else {
      result = static_cast<std::int32_t>(token_bytes.size());
      id_of.emplace(joined, result);
      token_bytes.push_back(std::move(joined));
    }
    merges.push_back({a, b, result});
    const auto merge_number = static_cast<std::uint32_t>(merges.size());
    // Rewrite every piece that holds (a, b), left to right, moving the counts of the pairs
    // around each occurrence to the pairs with the new token.
    changed.clear();
    const auto add = [&](Pair pair, std::int64_t delta, std::uint32_t w) {
      pair_count[pair] += delta;
      changed.push_back(pair);
      if (delta > 0) {
        std::vector<std::uint32_t>& list = where[pair];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    };
    const std::vector<std::uint32_t> holders = std::move(where[top.pair]);
    where.erase(top.pair);
    for (const std::uint32_t w : holders) {
      if (seen[w] == merge_number) continue;
      seen[w] = merge_number;
      Piece& p = pieces[w];
      std::vector<std::int32_t>& s = p.symbols;
      std::size_t out = 0;
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          if (out > 0) {
            add(make_pair(s[out - 1], a), -p.count, w);
            add(make_pair(s[out - 1], result), p.count, w);
          }
          if (i + 2 < s.size()) {
            add(make_pair(b, s[i + 2]), -p.count, w);
            add(make_pair(result, s[i + 2]), p.count, w);
          }
          s[out++] = result;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      s.resize(out);
    }
    pair_count.erase(top.pair);
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    for (const Pair pair : changed) {
      const auto c = pair_count.find(pair);
      if (c == pair_count.end()) continue;
      if (c->second <= 0) {
        pair_count.erase(c);
      } else {
        heap.push({c->second, pair});
      }
    }
  }

  symbols.reserve(token_bytes.size());
  for (const std::string& t : token_bytes) symbols.push_back(byte_symbols(t));
  return BpeTokenizer(std::move(symbols), std::move(merges), {}, false);
}

}  // namespace kiln
