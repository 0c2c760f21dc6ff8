// kiln-prepare: raw text to a prepared dataset for train_lm, eval_ppl, generate and
// attention_maps (--data DIR): a tokenizer (byte-level BPE trained on the training text by
// default, or characters, or words, or a tokenizer.json such as GPT-2's) and token shards
// train.bin, valid.bin, test.bin that the programs memory-map (data/prepare.h,
// docs/tokenizers.md).
//
//   build/apps/kiln-prepare --input $KILN_DATA --out data/wt2-bpe8k --vocab-size 8192
//   build/apps/kiln-prepare --input books/ --out data/books-char --tokenizer char
//   build/apps/kiln-prepare --train a.txt --valid b.txt --test c.txt --out data/abc
//       --tokenizer-file gpt2/tokenizer.json                           (one command line)
//   build/apps/train_lm --data data/wt2-bpe8k
//
// It prints each split's sources and its tokens, then the dataset's summary.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/flags.h"
#include "apps/common/program.h"
#include "core/error.h"
#include "core/threads.h"
#include "data/prepare.h"
#include "data/xxhash64.h"

using namespace kiln;

int main(int argc, char** argv) {
  CLI::App app{
      "kiln-prepare: raw text files or folders to a prepared dataset (a tokenizer and token "
      "shards train.bin, valid.bin, test.bin) that train_lm, eval_ppl, generate and "
      "attention_maps take as --data"};
  PrepareOptions o;
  int threads = 0;
  std::int64_t max_line_bytes = static_cast<std::int64_t>(o.max_line_bytes);
  app.add_option("--input", o.inputs,
                 "text files or folders (a folder's files recursively, in path order, hidden "
                 "ones skipped), cut into train, valid and test by --valid-fraction and "
                 "--test-fraction at line starts; a folder with train.txt, valid.txt and "
                 "test.txt gives its own three splits");
  app.add_option("--train", o.train,
                 "the training text (a file or folder), with --valid and --test");
  app.add_option("--valid", o.valid, "the validation text, with --train and --test");
  app.add_option("--test", o.test, "the test text, with --train and --valid");
  app.add_option("--out", o.out,
                 "the dataset folder (created, or replaced whole once the new one is complete)")
      ->required();
  app.add_option("--tokenizer", o.tokenizer,
                 "bpe (GPT-2's byte-level BPE, trained on the training text), char (UTF-8 code "
                 "points and byte tokens) or word (whitespace words, <eos> per line)")
      ->check(CLI::IsMember({"bpe", "char", "word"}))
      ->capture_default_str();
  app.add_option("--tokenizer-file", o.tokenizer_file,
                 "use this tokenizer.json (e.g. GPT-2's, or another dataset's) instead of "
                 "training one");
  add_number_flag(app, "--vocab-size", o.vocab_size,
                  "tokens in the vocabulary: bpe 256 bytes + merges (default 8192); char 256 "
                  "bytes + the most frequent code points",
                  {.min = 0, .zero = "bpe: 8192; char: every code point seen"});
  add_number_flag(app, "--valid-fraction", o.valid_fraction,
                  "share of the --input bytes for the valid split (after train)",
                  {.min = 0, .max = 1, .min_open = true, .max_open = true});
  add_number_flag(app, "--test-fraction", o.test_fraction,
                  "share of the --input bytes for the test split (at the end)",
                  {.min = 0, .max = 1, .min_open = true, .max_open = true});
  add_number_flag(app, "--max-line-bytes", max_line_bytes,
                  "refuse a text with a line longer than this (a sign of a file that is not "
                  "text)",
                  {.min = 1});
  add_number_flag(app, "--threads", threads, "threads that encode and train",
                  thread_flag_range("every core"));
  CLI11_PARSE(app, argc, argv);

  return run_program("kiln-prepare", [&] {
    const bool fractions = app.count("--valid-fraction") + app.count("--test-fraction") > 0;
    KILN_CHECK(!fractions || o.train.empty(),
               "--valid-fraction and --test-fraction split --input; with --train, --valid and "
               "--test the splits are given");
    // An empty path is a mistake (an unset shell variable), not a request to train one.
    KILN_CHECK(app.count("--tokenizer-file") == 0 || !o.tokenizer_file.empty(),
               "--tokenizer-file: the path is empty; give a tokenizer.json, or leave the flag "
               "out to train a tokenizer");
    KILN_CHECK(o.tokenizer_file.empty() || app.count("--vocab-size") == 0,
               "--vocab-size trains a tokenizer; --tokenizer-file {} gives one", o.tokenizer_file);
    o.max_line_bytes = static_cast<std::uint64_t>(max_line_bytes);
    o.threads = threads > 0 ? threads : num_threads();
    o.log = [](const std::string& line) { fmt::print("kiln-prepare: {}\n", line); };
    const PrepareResult r = prepare_dataset(o);
    for (const PreparedSplit& s : r.splits)
      fmt::print("{}: {} tokens, {} bytes, {} words, ids hash {}\n", s.name, s.header.tokens,
                 s.header.text_bytes, s.header.words, hex64(s.header.ids_hash));
    fmt::print(
        "dataset {}: {} tokenizer, vocab {}, hash {}{}\n", o.out, r.tokenizer_kind, r.vocab_size,
        hex64(r.tokenizer_hash),
        r.tokenizer_seconds > 0 ? fmt::format(", trained in {:.1f}s", r.tokenizer_seconds) : "");
    return 0;
  });
}
