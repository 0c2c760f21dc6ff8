// Perplexity of a language model on a token stream: the one function behind train_lm's validation
// and final lines and eval_ppl, so that their numbers agree bit for bit.
//
// The headline protocol (stride = T, the default) is bench/torch_ref.py's evaluate: the
// stream in B columns (data/batches.h's layout: column b holds tokens [b·R, (b+1)·R)),
// non-overlapping windows of T rows, every target token counted, the loss summed over all targets
// and divided by their number. A stride S < T slides the window by S rows instead: each window
// has up to T rows of input and scores only its last S targets (the first window scores all of
// its own), so every target is still scored exactly once, with more left context.
//
//   lm::EvalResult r = lm::evaluate(model, corpus.valid().ids, {.batch_size = 10, .seq_len = 64});
//   fmt::print("valid ppl {}\n", format_ppl(r.loss));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "data/dataset.h"
#include "data/token_view.h"
#include "distributed/communicator.h"
#include "nn/language_model.h"

namespace kiln::lm {

struct EvalOptions {
  std::int64_t batch_size = 10;          // B
  std::int64_t seq_len = 0;              // T, the training window length
  std::int64_t stride = 0;               // S in [1, T]; 0 means T (non-overlapping windows)
  Precision precision = Precision::f32;  // the matrix products' (core/autocast.h)
  // Polled between forward passes; returning true abandons the evaluation (a signal asked to
  // stop). Not polled with several ranks: they finish together.
  std::function<bool()> cancelled;
  // With several ranks, each runs its share of the forward passes (dealt round robin) and the
  // losses are summed over the ranks: every rank gets one process's result, bit for bit.
  // Every rank must call evaluate with the same model, tokens and options.
  dist::Communicator* communicator = nullptr;
};

struct EvalResult {
  double loss = 0.0;        // nats per target token
  std::int64_t tokens = 0;  // targets scored: B·(R − 1)
  double seconds = 0.0;
  bool complete = true;  // false when cancelled (loss and tokens are then partial)
};

// Runs the model (in eval mode, without autograd; its mode is restored) over tokens on the
// model's device. Needs at least 2·B tokens.
EvalResult evaluate(nn::LanguageModel& model, TokenView tokens, const EvalOptions& options);
EvalResult evaluate(nn::LanguageModel& model, const std::vector<std::int64_t>& tokens,
                    const EvalOptions& options);

// A loss in the units that compare tokenizations (docs/tokenizers.md). The split's total loss is
// L = loss · N (the mean over the scored targets times the split's N tokens: evaluation scores
// B·(R − 1) of them, all but one per column and the remainder); then
//   bits_per_byte = L / ln 2 / text_bytes    (the UTF-8 bytes of the split's text as stored)
//   ppl_per_word  = exp(L / words)           (whitespace words and line ends; NaN when unknown)
struct TextMeasures {
  double nats_per_token = 0.0;
  double ppl_per_token = 0.0;
  double bits_per_byte = 0.0;
  double ppl_per_word = 0.0;
};
TextMeasures text_measures(double loss, const SplitTokens& split);

// exp(loss) as "{:.2f}": fixed notation, never an exponent.
std::string format_ppl(double loss);
// Whether a loss has a perplexity to report: exp(loss) finite (a loss below about 709.78 nats).
// A diverged run's finite loss of 4e8 nats would print "ppl inf".
bool has_perplexity(double loss);

}  // namespace kiln::lm
