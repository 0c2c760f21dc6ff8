// bench_tokenizer: byte-level BPE speed. Encodes a text repeated to at least --mb megabytes with
// a tokenizer.json on --threads threads (best of --repeats runs) and prints MB/s, after the time
// to load the tokenizer.json and hash it (what every program does at start-up); with
// --train-vocab N, times learning a vocabulary of N tokens from the text itself (not repeated).
// bench/tokenizers_encode.py does the same encoding with Hugging Face tokenizers;
// bench/compare_tokenizers.sh runs both.
//
//   build/bench/bench_tokenizer --tokenizer data/wt2-bpe8k/tokenizer.json
//       --text $KILN_DATA/train.txt --mb 50 --threads 2          (one command line)
//   build/bench/bench_tokenizer --text $KILN_DATA/train.txt --train-vocab 8448 --threads 2
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "data/bpe_trainer.h"
#include "data/corpus.h"
#include "data/tokenizer.h"

using namespace kiln;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_tokenizer: byte-level BPE encoding speed and vocabulary training time"};
  std::string tokenizer_path, text_path;
  double mb = 50;
  int threads = 2, repeats = 3;
  std::int64_t train_vocab = 0;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json to encode with");
  app.add_option("--text", text_path, "the text (repeated to --mb for encoding)")->required();
  app.add_option("--mb", mb, "encode at least this many MB (1e6 bytes)")->capture_default_str();
  app.add_option("--threads", threads, "threads")->capture_default_str();
  app.add_option("--repeats", repeats, "encodings timed (the best is reported)")
      ->capture_default_str();
  app.add_option("--train-vocab", train_vocab,
                 "time training a vocabulary of this many tokens (256 bytes + merges) instead");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::string text = read_text_file(text_path);
    if (train_vocab > 0) {
      const auto start = std::chrono::steady_clock::now();
      BpeTrainer trainer({.vocab_size = train_vocab, .threads = threads});
      trainer.add_text(text);
      const double counted = seconds_since(start);
      const BpeTokenizer tokenizer = trainer.train();
      const double total = seconds_since(start);
      fmt::print(
          "kiln train: {} tokens ({} merges) from {:.1f} MB ({} pieces, {} distinct) on {} "
          "threads in {:.2f} s (counting {:.2f} s, merging {:.2f} s)\n",
          tokenizer.vocab_size(), tokenizer.merges().size(), text.size() / 1e6, trainer.pieces(),
          trainer.distinct_pieces(), threads, total, counted, total - counted);
      return 0;
    }
    const auto load_start = std::chrono::steady_clock::now();
    const std::unique_ptr<Tokenizer> tokenizer = read_tokenizer(tokenizer_path);
    const std::uint64_t hash = tokenizer->hash();
    fmt::print("kiln load: {} ({} tokens, hash {:016x}) read and hashed in {:.3f} s\n",
               tokenizer_path, tokenizer->vocab_size(), hash, seconds_since(load_start));
    std::string big;
    while (static_cast<double>(big.size()) < mb * 1e6) big += text;
    double best = 1e300;
    std::size_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      tokens = tokenizer->encode(big, threads).size();
      best = std::min(best, seconds_since(start));
    }
    fmt::print("kiln encode: {:.1f} MB, {} tokens, {} threads: best {:.3f} s = {:.1f} MB/s\n",
               big.size() / 1e6, tokens, threads, best, big.size() / 1e6 / best);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
