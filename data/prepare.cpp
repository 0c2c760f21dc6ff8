#include "data/prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/input_file.h"
#include "core/io/output_file.h"
#include "core/io/staging_folder.h"
#include "data/bpe_trainer.h"
#include "data/byte_level.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/unicode_classes.h"
#include "data/word_tokenizer.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A byte-level BPE without merges: it cuts text where any byte-level BPE does.
BpeTokenizer bytes_only_bpe() {
  std::vector<std::string> symbols;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_symbol(static_cast<std::uint8_t>(b)), s);
    symbols.push_back(s);
  }
  return BpeTokenizer(std::move(symbols), {}, {}, false);
}

// A file, or a folder's regular files (recursively, hidden ones skipped, in path order).
std::vector<std::string> files_of(const std::string& input, std::string_view flag) {
  std::error_code ec;
  const fs::file_status status = fs::status(input, ec);
  KILN_CHECK(fs::exists(status), "{} {}: not found", flag, input);
  if (fs::is_regular_file(status)) return {input};
  KILN_CHECK(fs::is_directory(status), "{} {}: neither a file nor a folder", flag, input);
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  KILN_CHECK(!ec, "{} {}: cannot list the folder: {}", flag, input, ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::uint64_t size_of(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  KILN_CHECK(!ec, "prepare: cannot read the size of {}: {}", path, ec.message());
  return size;
}

// The first line start at or after byte `offset` of the file (its size when none is left).
std::uint64_t line_start_at_or_after(const std::string& path, std::uint64_t offset,
                                     std::uint64_t size) {
  if (offset == 0 || offset >= size) return std::min(offset, size);
  const FilePointer file = fopen_input_file(path, "prepare: text");
  KILN_CHECK(fseeko(file.get(), static_cast<off_t>(offset - 1), SEEK_SET) == 0,
             "prepare: cannot seek in {}", path);
  std::uint64_t at = offset - 1;  // the byte before the candidate line start
  for (int c; (c = std::fgetc(file.get())) != EOF; ++at)
    if (c == '\n') return at + 1;
  return size;
}

struct Split {
  std::string name;
  std::vector<TextSource> sources;
  std::vector<std::string> files;
};

// inputs' bytes [begin, end) as sources of the files they fall in.
std::vector<TextSource> sources_of(const std::vector<std::string>& files,
                                   const std::vector<std::uint64_t>& sizes, std::uint64_t begin,
                                   std::uint64_t end) {
  std::vector<TextSource> sources;
  std::uint64_t file_start = 0;
  for (std::size_t f = 0; f < files.size(); file_start += sizes[f], ++f) {
    const std::uint64_t from = std::max(begin, file_start);
    const std::uint64_t to = std::min(end, file_start + sizes[f]);
    if (from < to) sources.push_back({files[f], from - file_start, to - file_start});
  }
  return sources;
}

std::vector<Split> plan_splits(const PrepareOptions& o) {
  const bool given = !o.train.empty() || !o.valid.empty() || !o.test.empty();
  std::vector<Split> splits;
  if (given) {
    KILN_CHECK(!o.train.empty() && !o.valid.empty() && !o.test.empty() && o.inputs.empty(),
               "--train, --valid and --test go together, without --input");
    for (const auto& [name, input] :
         {std::pair{"train", o.train}, std::pair{"valid", o.valid}, std::pair{"test", o.test}}) {
      Split s{name, {}, files_of(input, fmt::format("--{}", name))};
      for (const std::string& file : s.files) s.sources.push_back({file, 0, size_of(file)});
      splits.push_back(std::move(s));
    }
    return splits;
  }
  KILN_CHECK(!o.inputs.empty(), "no text given: --input PATH (or --train, --valid and --test)");
  if (o.inputs.size() == 1) {  // WikiText-2's layout: the folder's own three splits
    const fs::path dir(o.inputs[0]);
    std::error_code ec;
    if (fs::is_directory(dir, ec) && fs::is_regular_file(dir / "train.txt", ec) &&
        fs::is_regular_file(dir / "valid.txt", ec) && fs::is_regular_file(dir / "test.txt", ec)) {
      for (const std::string name : {"train", "valid", "test"}) {
        const std::string file = (dir / (name + ".txt")).string();
        splits.push_back({name, {{file, 0, size_of(file)}}, {file}});
      }
      return splits;
    }
  }
  KILN_CHECK(o.valid_fraction > 0 && o.test_fraction > 0 && o.valid_fraction + o.test_fraction < 1,
             "--valid-fraction {} and --test-fraction {}: each must be above 0 and their sum "
             "below 1",
             o.valid_fraction, o.test_fraction);
  std::vector<std::string> files;
  for (const std::string& input : o.inputs)
    for (std::string& file : files_of(input, "--input")) files.push_back(std::move(file));
  std::vector<std::uint64_t> sizes;
  std::uint64_t total = 0;
  for (const std::string& file : files) total += sizes.emplace_back(size_of(file));
  KILN_CHECK(total > 0, "--input {}: no text (the inputs hold 0 bytes)", fmt::join(o.inputs, " "));
  // A global byte offset moved to the next line start (or file start).
  const auto line_start = [&](double fraction) {
    const auto offset =
        static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(total)));
    std::uint64_t file_start = 0;
    for (std::size_t f = 0; f < files.size(); file_start += sizes[f], ++f)
      if (offset < file_start + sizes[f])
        return file_start + line_start_at_or_after(files[f], offset - file_start, sizes[f]);
    return total;
  };
  const std::uint64_t valid_start = line_start(1 - o.valid_fraction - o.test_fraction);
  const std::uint64_t test_start = std::max(valid_start, line_start(1 - o.test_fraction));
  const std::uint64_t bounds[4] = {0, valid_start, test_start, total};
  const char* names[3] = {"train", "valid", "test"};
  for (int k = 0; k < 3; ++k) {
    Split s{names[k], sources_of(files, sizes, bounds[k], bounds[k + 1]), {}};
    for (const TextSource& source : s.sources) s.files.push_back(source.path);
    splits.push_back(std::move(s));
  }
  return splits;
}

std::string describe_sources(const std::vector<TextSource>& sources) {
  std::string out;
  for (const TextSource& s : sources) {
    if (!out.empty()) out += ", ";
    out += s.begin == 0 && s.end == size_of(s.path)
               ? s.path
               : fmt::format("{} [bytes {}, {})", s.path, s.begin, s.end);
  }
  return out;
}

std::unique_ptr<Tokenizer> make_tokenizer(const PrepareOptions& o, const Split& train,
                                          double& seconds) {
  const auto start = std::chrono::steady_clock::now();
  if (!o.tokenizer_file.empty()) return read_tokenizer(o.tokenizer_file);
  const auto read = [&](const Tokenizer& cutter, const auto& add) {
    read_text_blocks(train.sources, cutter, o.block_bytes, o.max_line_bytes,
                     [&](std::string_view block, bool) { add(block); });
  };
  std::unique_ptr<Tokenizer> tokenizer;
  if (o.tokenizer == "bpe") {
    BpeTrainer trainer(
        {.vocab_size = o.vocab_size > 0 ? o.vocab_size : 8192, .threads = o.threads});
    read(bytes_only_bpe(), [&](std::string_view block) { trainer.add_text(block); });
    tokenizer = std::make_unique<BpeTokenizer>(trainer.train());
  } else if (o.tokenizer == "char") {
    CharTokenizerBuilder builder;
    read(CharTokenizer({}), [&](std::string_view block) { builder.add_text(block); });
    tokenizer = std::make_unique<CharTokenizer>(builder.build(o.vocab_size));
  } else {
    KILN_CHECK(o.tokenizer == "word", "--tokenizer {}: expected bpe, char or word", o.tokenizer);
    KILN_CHECK(o.vocab_size == 0,
               "--vocab-size {}: a word vocabulary holds every word of the training text",
               o.vocab_size);
    WordTokenizerBuilder builder;
    read(WordTokenizer(Vocabulary({std::string(Vocabulary::kEos)})),
         [&](std::string_view block) { builder.add_text(block, describe_sources(train.sources)); });
    tokenizer = std::make_unique<WordTokenizer>(builder.build());
  }
  seconds = seconds_since(start);
  return tokenizer;
}

// The files of a prepared dataset: the folder holds these and nothing else.
constexpr std::string_view kDatasetFiles[] = {"tokenizer.json", "train.bin", "valid.bin",
                                              "test.bin", "prepare.json"};

}  // namespace

void read_text_blocks(const std::vector<TextSource>& sources, const Tokenizer& cutter,
                      std::uint64_t block_bytes, std::uint64_t max_line_bytes,
                      const std::function<void(std::string_view, bool)>& on_block) {
  for (const TextSource& source : sources) {
    if (source.begin >= source.end) continue;
    const FilePointer file = fopen_input_file(source.path, "prepare: text");
    KILN_CHECK(fseeko(file.get(), static_cast<off_t>(source.begin), SEEK_SET) == 0,
               "prepare: cannot seek in {}", source.path);
    // Where errors point: the line (counted from the source's start) and the byte offset.
    const std::string where = source.begin == 0
                                  ? source.path
                                  : fmt::format("{} (from byte {})", source.path, source.begin);
    std::uint64_t left = source.end - source.begin, offset = source.begin, line = 1,
                  line_length = 0;
    std::string buffer;
    while (true) {
      if (left > 0) {
        const std::size_t old = buffer.size();
        const auto want = static_cast<std::size_t>(std::min(block_bytes, left));
        buffer.resize(old + want);
        const std::size_t got = std::fread(buffer.data() + old, 1, want, file.get());
        KILN_CHECK(got == want,
                   "prepare: {}: read {} of {} bytes at byte {} (did the file change?)",
                   source.path, got, want, offset);
        for (std::size_t i = old; i < buffer.size(); ++i, ++offset) {
          const char c = buffer[i];
          if (c == '\n' || c == '\r') {
            line_length = 0;
            if (c == '\n' || i + 1 >= buffer.size() || buffer[i + 1] != '\n') ++line;
            continue;
          }
          KILN_CHECK(c != '\0',
                     "prepare: {}:{}: NUL byte at byte offset {}: not a text file; expected UTF-8 "
                     "text",
                     where, line, offset);
          KILN_CHECK(++line_length <= max_line_bytes,
                     "prepare: {}:{}: the line is longer than {} bytes (--max-line-bytes); raise "
                     "the limit if the text really has lines this long",
                     where, line, max_line_bytes);
        }
        left -= want;
      }
      if (left == 0) {
        on_block(buffer, true);
        break;
      }
      const std::size_t cut = cutter.last_cut(buffer);
      if (cut == 0) {
        KILN_CHECK(buffer.size() <= 4 * block_bytes + max_line_bytes,
                   "prepare: {}: {} bytes before byte {} hold no place where the {} tokenizer "
                   "can cut the text (one run of whitespace?)",
                   where, buffer.size(), offset, cutter.kind());
        continue;
      }
      on_block(std::string_view(buffer).substr(0, cut), false);
      buffer.erase(0, cut);
    }
  }
}

PrepareResult prepare_dataset(const PrepareOptions& o) {
  const auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  KILN_CHECK(!o.out.empty(), "--out DIR is required");
  KILN_CHECK(o.max_line_bytes >= 1, "--max-line-bytes must be at least 1");
  const std::vector<Split> splits = plan_splits(o);
  for (const Split& s : splits) {
    std::uint64_t bytes = 0;
    for (const TextSource& source : s.sources) bytes += source.end - source.begin;
    KILN_CHECK(
        bytes > 0, "prepare: the {} split has no text ({})", s.name,
        s.files.empty() ? std::string("no file") : fmt::format("{}", fmt::join(s.files, ", ")));
    log(fmt::format("{}: {} bytes from {}", s.name, bytes, describe_sources(s.sources)));
  }
  const fs::path out = folder_to_replace(o.out, "--out", kDatasetFiles);
  StagingFolder staging(out, "--out", "kiln-prepare");
  PrepareResult result;
  const std::unique_ptr<Tokenizer> tokenizer =
      make_tokenizer(o, splits[0], result.tokenizer_seconds);
  result.tokenizer_kind = tokenizer->kind();
  result.vocab_size = tokenizer->vocab_size();
  result.tokenizer_hash = tokenizer->hash();
  log(o.tokenizer_file.empty()
          ? fmt::format("tokenizer: {} trained on the train split, {} tokens, in {:.1f}s",
                        result.tokenizer_kind, result.vocab_size, result.tokenizer_seconds)
          : fmt::format("tokenizer: {} from {}, {} tokens", result.tokenizer_kind, o.tokenizer_file,
                        result.vocab_size));

  // Every split encoded before any file is replaced: bad text stops the run with nothing written.
  std::vector<std::unique_ptr<ShardWriter>> writers;
  for (const Split& s : splits) {
    const auto start = std::chrono::steady_clock::now();
    auto& writer = writers.emplace_back(std::make_unique<ShardWriter>(
        (staging.path() / (s.name + ".bin")).string(),
        ShardWriter::Options{.id_bytes = id_bytes_for(result.vocab_size),
                             .vocab_size = static_cast<std::uint32_t>(result.vocab_size),
                             .tokenizer_hash = result.tokenizer_hash}));
    // finish() ends each source's last line and returns the count of all sources so far: the
    // header gets what each source adds to it.
    WordCounter words;
    std::int64_t words_written = 0;
    read_text_blocks(s.sources, *tokenizer, o.block_bytes, o.max_line_bytes,
                     [&](std::string_view block, bool source_end) {
                       writer->append(tokenizer->encode(block, o.threads));
                       words.add(block);
                       std::int64_t counted = 0;
                       if (source_end) {
                         const std::int64_t total = words.finish();
                         counted = total - words_written;
                         words_written = total;
                       }
                       writer->add_text(block.size(), static_cast<std::uint64_t>(counted));
                     });
    const ShardHeader& h = writer->header();
    KILN_CHECK(h.tokens > 0, "prepare: the {} split encodes to no tokens", s.name);
    log(fmt::format("{}: {} tokens ({:.2f} bytes per token), {} words, in {:.1f}s", s.name,
                    h.tokens, static_cast<double>(h.text_bytes) / static_cast<double>(h.tokens),
                    h.words, seconds_since(start)));
  }
  write_file_atomically((staging.path() / "tokenizer.json").string(), tokenizer->to_json(),
                        "tokenizer");
  nlohmann::ordered_json manifest;
  manifest["format"] = "kiln-dataset-1";
  manifest["tokenizer"] = {{"kind", result.tokenizer_kind},
                           {"vocab_size", result.vocab_size},
                           {"hash", hex64(result.tokenizer_hash)}};
  for (std::size_t k = 0; k < splits.size(); ++k) {
    const ShardHeader h = writers[k]->commit();
    result.splits.push_back({splits[k].name, splits[k].files, h});
    manifest["splits"][splits[k].name] = {
        {"file", splits[k].name + ".bin"}, {"tokens", h.tokens},
        {"text_bytes", h.text_bytes},      {"words", h.words},
        {"ids_hash", hex64(h.ids_hash)},   {"sources", describe_sources(splits[k].sources)}};
  }
  write_file_atomically((staging.path() / "prepare.json").string(), manifest.dump(2) + "\n",
                        "manifest");
  staging.replace();
  return result;
}

}  // namespace kiln
