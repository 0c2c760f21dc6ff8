// LanguageModelBatches: a token stream cut into (inputs, targets) windows for next-token
// prediction, exactly as bench/torch_ref.py's batchify and get_batch do.
//
// Shape letters: N tokens in the stream, B columns (batch size), R = N / B rows (the remainder
// N mod B is dropped), T the window length.
//
// The stream is laid out in B columns, column b holding tokens [b·R, (b+1)·R): row r, column b
// is token b·R + r, so every column is a contiguous run of text. Window k starts at row
// i = k·T and has t = min(T, R − 1 − i) rows; batch-first, as the model takes it:
//   inputs[b][j]  = token b·R + i + j        // (B, t)
//   targets[b][j] = token b·R + i + j + 1    // (B, t), the next token
// Every window has t = T but perhaps the last; there are ceil((R − 1) / T) of them.
//
//   LanguageModelBatches batches(corpus.train().ids, /*B=*/20, /*T=*/35);
//   for (std::int64_t k : batches.epoch_order(seed, epoch)) {   // shuffled windows
//     Batch batch = batches.window(k);    // batch.inputs, batch.targets: (B, t) int64
//   }
//
// Training order. Without shuffling, an epoch visits windows 0, 1, 2, ... With shuffling, the
// order of epoch e is a permutation that depends only on (seed, e) (see shuffled_order), so the
// pair (epoch, index within the epoch) is all a checkpoint needs to resume mid-epoch exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/token_view.h"

namespace kiln {

// One window: next-token targets for the inputs.
struct Batch {
  Tensor inputs;   // (B, t) int64 token ids
  Tensor targets;  // (B, t) int64, targets[b][j] is the token after inputs[b][j]
};

class LanguageModelBatches {
 public:
  // tokens: the stream (N ids); batch_size B >= 1; seq_len T >= 1. An error unless N >= 2·B,
  // the least that gives each column one target.
  LanguageModelBatches(std::vector<std::int64_t> tokens, std::int64_t batch_size,
                       std::int64_t seq_len);
  // The same over ids held elsewhere (a memory-mapped shard), which must outlive the batches.
  LanguageModelBatches(TokenView tokens, std::int64_t batch_size, std::int64_t seq_len);
  // A copy of batches that hold their stream holds its own copy of it.
  LanguageModelBatches(const LanguageModelBatches& other);
  LanguageModelBatches& operator=(const LanguageModelBatches& other);
  LanguageModelBatches(LanguageModelBatches&&) = default;
  LanguageModelBatches& operator=(LanguageModelBatches&&) = default;

  std::int64_t batch_size() const { return batch_size_; }  // B
  std::int64_t seq_len() const { return seq_len_; }        // T
  std::int64_t rows() const { return rows_; }              // R = N / B
  std::int64_t num_windows() const { return (rows_ - 1 + seq_len_ - 1) / seq_len_; }
  // Target tokens in one pass over all windows: B·(R − 1).
  std::int64_t num_targets() const { return batch_size_ * (rows_ - 1); }

  // The first row of window k (k·T) and its length t; an error if k is outside [0, num_windows).
  std::int64_t window_start(std::int64_t k) const;
  std::int64_t window_length(std::int64_t k) const;
  // Window k as tensors on device.
  Batch window(std::int64_t k, Device device = Device::cpu()) const;

  // The windows of epoch `epoch` in training order: shuffled_order(num_windows(), seed, epoch)
  // when shuffle is true, else 0, 1, ..., num_windows() − 1.
  std::vector<std::int64_t> epoch_order(std::uint64_t seed, std::uint64_t epoch,
                                        bool shuffle = true) const;

 private:
  std::vector<std::int64_t> owned_;  // the stream, when the batches hold it
  TokenView tokens_;                 // the stream; its first B·R tokens are used
  std::int64_t batch_size_, seq_len_, rows_;
};

// A permutation of 0..n−1 that depends only on (seed, epoch), the same on every machine:
// Fisher-Yates from the top, where step j = n−1, ..., 1 swaps element j with element
// r = floor(u · (j + 1)), u the 64-bit number (w1·2³² + w0) / 2⁶⁴ from the Philox4x32-10 words
// (w0, w1, w2, w3) of counter (j, epoch, kShuffleStream) under key seed (core/philox.h; the
// counter's words are j's low and high 32 bits, epoch's low 32 bits, and the tag). The tag keeps
// these draws apart from every Generator draw, whose counters have zero in words 2 and 3.
// epoch must be below 2³².
inline constexpr std::uint32_t kShuffleStream = 0x73687566;  // "shuf"
std::vector<std::int64_t> shuffled_order(std::int64_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace kiln
