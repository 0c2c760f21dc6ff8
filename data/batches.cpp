#include "data/batches.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/ops/factories.h"
#include "core/philox.h"

namespace kiln {

LanguageModelBatches::LanguageModelBatches(std::vector<std::int64_t> tokens,
                                           std::int64_t batch_size, std::int64_t seq_len)
    : LanguageModelBatches(TokenView(tokens), batch_size, seq_len) {
  owned_ = std::move(tokens);  // the view stays valid: moving keeps the vector's buffer
}

LanguageModelBatches::LanguageModelBatches(TokenView tokens, std::int64_t batch_size,
                                           std::int64_t seq_len)
    : tokens_(tokens), batch_size_(batch_size), seq_len_(seq_len) {
  KILN_CHECK(batch_size >= 1, "LanguageModelBatches: batch size must be at least 1, got {}",
             batch_size);
  KILN_CHECK(seq_len >= 1, "LanguageModelBatches: window length must be at least 1, got {}",
             seq_len);
  const std::int64_t n = tokens_.size();
  KILN_CHECK(n / 2 >= batch_size,  // n >= 2 B, without overflowing 2 B
             "LanguageModelBatches: {} tokens are too few for batch size {}: each of the {} "
             "columns needs at least 2 tokens (an input and its target)",
             n, batch_size, batch_size);
  rows_ = n / batch_size;  // the remainder N mod B is never read
}

LanguageModelBatches::LanguageModelBatches(const LanguageModelBatches& other)
    : owned_(other.owned_),
      tokens_(other.owned_.empty() ? other.tokens_ : TokenView(owned_)),
      batch_size_(other.batch_size_),
      seq_len_(other.seq_len_),
      rows_(other.rows_) {}

LanguageModelBatches& LanguageModelBatches::operator=(const LanguageModelBatches& other) {
  if (this != &other) *this = LanguageModelBatches(other);
  return *this;
}

std::int64_t LanguageModelBatches::window_start(std::int64_t k) const {
  KILN_CHECK(k >= 0 && k < num_windows(), "LanguageModelBatches: window {} is out of range [0, {})",
             k, num_windows());
  return k * seq_len_;
}

std::int64_t LanguageModelBatches::window_length(std::int64_t k) const {
  return std::min(seq_len_, rows_ - 1 - window_start(k));
}

Batch LanguageModelBatches::window(std::int64_t k, Device device) const {
  const std::int64_t i = window_start(k), t = window_length(k);
  std::vector<std::int64_t> inputs(static_cast<std::size_t>(batch_size_ * t));  // (B, t)
  std::vector<std::int64_t> targets(inputs.size());                             // (B, t)
  std::vector<std::int64_t> rows(static_cast<std::size_t>(t + 1));
  for (std::int64_t b = 0; b < batch_size_; ++b) {
    tokens_.copy(b * rows_ + i, t + 1, rows.data());  // rows i..i+t of column b
    for (std::int64_t j = 0; j < t; ++j) {
      inputs[b * t + j] = rows[j];
      targets[b * t + j] = rows[j + 1];
    }
  }
  return Batch{from_vector(inputs, {batch_size_, t}, device),
               from_vector(targets, {batch_size_, t}, device)};
}

std::vector<std::int64_t> LanguageModelBatches::epoch_order(std::uint64_t seed, std::uint64_t epoch,
                                                            bool shuffle) const {
  if (shuffle) return shuffled_order(num_windows(), seed, epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(num_windows()));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<std::int64_t> shuffled_order(std::int64_t n, std::uint64_t seed, std::uint64_t epoch) {
  KILN_CHECK(n >= 0, "shuffled_order: n must be non-negative, got {}", n);
  KILN_CHECK(epoch <= 0xFFFFFFFFu, "shuffled_order: epoch {} does not fit in 32 bits", epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t j = n - 1; j >= 1; --j) {
    const auto counter = static_cast<std::uint64_t>(j);
    const philox::Words w = philox::philox4x32_10(
        static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
        static_cast<std::uint32_t>(epoch), kShuffleStream, static_cast<std::uint32_t>(seed),
        static_cast<std::uint32_t>(seed >> 32));
    const std::uint64_t u = (static_cast<std::uint64_t>(w.w[1]) << 32) | w.w[0];
    // floor(u / 2^64 · (j + 1)), in exact integer arithmetic.
    const auto r = static_cast<std::int64_t>(
        (static_cast<unsigned __int128>(u) * static_cast<std::uint64_t>(j + 1)) >> 64);
    std::swap(order[j], order[r]);
  }
  return order;
}

}  // namespace kiln
