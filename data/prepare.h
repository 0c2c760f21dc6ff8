// The prepare step behind kiln-prepare: raw text files or folders become a prepared dataset
// (data/dataset.h): a tokenizer, trained on the training text or given, and one token shard per
// split, written without ever holding the text in memory: files are read in blocks of a few MiB,
// cut where the tokenizer allows (Tokenizer::last_cut), encoded on several threads and appended
// to the shards.
//
//   prepare_dataset({.inputs = {"books/"}, .out = "data/books-bpe", .vocab_size = 8192});
//
// Splits: three inputs given as train, valid and test; or inputs (files and folders, a folder's
// files taken recursively in path order, hidden ones skipped) cut into train, valid and test by
// bytes: valid starts at the first line start at or after (1 − valid_fraction − test_fraction)
// of all the bytes, test at the first line start at or after (1 − test_fraction); a folder of
// train.txt, valid.txt and test.txt (WikiText-2's layout) gives its own three splits. Each file
// is encoded on its own: no piece runs across two files.
//
// Errors (before anything is written, naming the file, line and flag): a missing input, a NUL
// byte (not text), a line longer than max_line_bytes, an input or split without text, an --out
// folder holding files that are not a dataset's.
//
// The dataset folder is replaced whole: the new one is written beside it and swapped in once
// complete, so that a run stopped at any point (an error, a full disk, a signal) leaves the old
// dataset or the new one, never a mix (core/io/staging_folder.h: a mount point, a cross-device
// or unwritable place and a second run on the same folder are refused at the start).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace kiln {

struct PrepareOptions {
  std::vector<std::string> inputs;  // split by the fractions
  std::string train, valid, test;   // or each split given (a file or a folder)
  std::string out;                  // the dataset folder (created, or replaced whole)
  std::string tokenizer = "bpe";    // bpe, char or word
  std::string tokenizer_file;       // a tokenizer.json to use instead of training one
  std::int64_t vocab_size = 0;      // bpe: default 8192; char: 0 = every code point seen
  double valid_fraction = 0.01;
  double test_fraction = 0.01;
  std::uint64_t max_line_bytes = std::uint64_t{1} << 20;
  std::uint64_t block_bytes = std::uint64_t{8} << 20;  // text read at a time
  int threads = 1;
  std::function<void(const std::string&)> log = {};  // progress lines
};

struct PreparedSplit {
  std::string name;
  std::vector<std::string> files;
  ShardHeader header;
};

struct PrepareResult {
  std::string tokenizer_kind;
  std::int64_t vocab_size = 0;
  std::uint64_t tokenizer_hash = 0;
  double tokenizer_seconds = 0.0;  // training it (0 when given)
  std::vector<PreparedSplit> splits;
};

PrepareResult prepare_dataset(const PrepareOptions& options);

// A byte range of a file: a split's text is one or more of them.
struct TextSource {
  std::string path;
  std::uint64_t begin = 0, end = 0;
};

// Reads sources in blocks of about block_bytes, each cut at a cut of `cutter` (or a source's
// end: sources are cut on their own), checking every byte: a NUL byte or a line over
// max_line_bytes is an error naming the file and line. on_block(text, source_end) sees the blocks
// in order; source_end is true for a source's last block.
void read_text_blocks(const std::vector<TextSource>& sources, const class Tokenizer& cutter,
                      std::uint64_t block_bytes, std::uint64_t max_line_bytes,
                      const std::function<void(std::string_view, bool)>& on_block);

}  // namespace kiln
