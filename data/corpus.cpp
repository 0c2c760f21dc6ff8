#include "data/corpus.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/io/input_file.h"
#include "core/io/utf8.h"

namespace kiln {
namespace {

// What a byte means to the tokenizer. Whitespace follows Python's str.split(); line endings
// follow Python's universal newlines ("\n", "\r\n", "\r"), as torch_ref's `for line in f` does.
enum ByteClass : std::uint8_t {
  kWordByte,
  kSpace,         // \t \v \f \x1c-\x1f and ' '
  kLineFeed,      // \n
  kReturn,        // \r, alone or before \n
  kUnicodeSpace,  // a lead byte that may start one of Unicode's spaces (see unicode_space_size)
};

constexpr std::array<std::uint8_t, 256> kByteClass = [] {
  std::array<std::uint8_t, 256> table{};
  for (int c : {'\t', '\v', '\f', ' '}) table[c] = kSpace;
  for (int c = 0x1C; c <= 0x1F; ++c) table[c] = kSpace;
  table['\n'] = kLineFeed;
  table['\r'] = kReturn;
  for (int c : {0xC2, 0xE1, 0xE2, 0xE3}) table[c] = kUnicodeSpace;
  return table;
}();

// The size in bytes of the non-ASCII whitespace character at s (n bytes available), or 0 if
// there is none: U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000,
// the code points beyond ASCII for which Python's str.isspace() is true.
std::size_t unicode_space_size(const unsigned char* s, std::size_t n) {
  if (n >= 2 && s[0] == 0xC2) return s[1] == 0x85 || s[1] == 0xA0 ? 2 : 0;
  if (n < 3) return 0;
  if (s[0] == 0xE1) return s[1] == 0x9A && s[2] == 0x80 ? 3 : 0;
  if (s[0] == 0xE3) return s[1] == 0x80 && s[2] == 0x80 ? 3 : 0;
  if (s[0] != 0xE2) return 0;
  if (s[1] == 0x80) {
    return s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF ? 3 : 0;
  }
  return s[1] == 0x81 && s[2] == 0x9F ? 3 : 0;
}

// The 1-based line and column (in bytes) of a byte offset, counting lines as the tokenizer does.
struct Position {
  std::int64_t line = 1;
  std::size_t column = 1;
};

Position position_of(std::string_view text, std::size_t offset) {
  Position position;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    const char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    if (c == '\n' || c == '\r') {
      ++position.line;
      line_start = i + 1;
    }
  }
  position.column = offset - line_start + 1;
  return position;
}

// Rejects text that is not a corpus before any word is read: NUL bytes (a binary file), invalid
// UTF-8, lines over kMaxLineBytes.
void check_text(std::string_view text, std::string_view source) {
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(nul) - text.data());
    const Position at = position_of(text, offset);
    fail(
        "corpus: {}:{}: NUL byte at byte offset {} (column {}): this is not a text file; "
        "expected UTF-8 text with one paragraph per line",
        source, at.line, offset, at.column);
  }
  if (const std::size_t offset = find_invalid_utf8(text); offset != std::string_view::npos) {
    const Position at = position_of(text, offset);
    fail(
        "corpus: {}:{}: invalid UTF-8 (byte 0x{:02x}) at byte offset {} (column {}): expected "
        "UTF-8 text; convert the file to UTF-8 first",
        source, at.line, static_cast<unsigned char>(text[offset]), offset, at.column);
  }
  std::int64_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\r') continue;
    KILN_CHECK(i - line_start <= kMaxLineBytes,
               "corpus: {}:{}: line of {} bytes is over the limit of {} bytes (1 MiB): expected "
               "text with one paragraph per line",
               source, line, i - line_start, kMaxLineBytes);
    if (i + 1 < text.size() && text[i] == '\r' && text[i + 1] == '\n') ++i;
    ++line;
    line_start = i + 1;
  }
}

// Splits checked text into words and line ends: ids gets id_of(word, line) for each word and
// id_of("<eos>", line) after each line.
template <typename IdOf>
TokenStream split_text(std::string_view text, IdOf&& id_of) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  TokenStream out;
  out.ids.reserve(n / 5);  // WikiText-2 averages about 5 bytes per token
  std::size_t i = 0, word_start = 0, line_start = 0;
  bool in_word = false;
  const auto end_word = [&](std::size_t end) {
    if (!in_word) return;
    out.ids.push_back(id_of(text.substr(word_start, end - word_start), out.lines + 1));
    in_word = false;
  };
  const auto end_line = [&] {
    out.ids.push_back(id_of(Vocabulary::kEos, out.lines + 1));
    ++out.lines;
  };
  while (i < n) {
    std::size_t space = 0;  // bytes of whitespace at i
    bool line_end = false;
    switch (kByteClass[s[i]]) {
      case kWordByte:
        break;
      case kSpace:
        space = 1;
        break;
      case kLineFeed:
        space = 1, line_end = true;
        break;
      case kReturn:
        space = i + 1 < n && s[i + 1] == '\n' ? 2 : 1, line_end = true;
        break;
      case kUnicodeSpace:
        space = unicode_space_size(s + i, n - i);
        break;
    }
    if (space == 0) {
      if (!in_word) in_word = true, word_start = i;
      ++i;
      continue;
    }
    end_word(i);
    i += space;
    if (line_end) {
      end_line();
      line_start = i;
    }
  }
  end_word(n);
  if (line_start < n) end_line();  // a last line without a line ending
  return out;
}

// A UTF-8 byte-order mark: an encoding signature at the start of a file, not text.
constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// The file's kind and, when it cannot be reached (a symbolic-link loop, a folder without
// permission), an error naming it; a missing path is left to the caller's message.
std::filesystem::file_status reachable_status(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  KILN_CHECK(!ec || ec == std::errc::no_such_file_or_directory, "corpus: cannot reach '{}': {}",
             path.string(), ec.message());
  return status;
}

}  // namespace

std::string resolve_data_dir(std::optional<std::string> flag) {
  if (flag) return *flag;
  if (const char* env = std::getenv("KILN_DATA"); env != nullptr && *env != '\0') return env;
  return "datasets/wikitext-2";
}

TokenStream tokenize_text(std::string_view text, std::string_view source, Vocabulary& vocabulary) {
  check_text(text, source);
  const bool mark = text.starts_with(kByteOrderMark);
  TokenStream out =
      split_text(text.substr(mark ? kByteOrderMark.size() : 0),
                 [&](std::string_view word, std::int64_t) { return vocabulary.add(word); });
  out.byte_order_mark = mark;
  out.bytes = static_cast<std::int64_t>(text.size());
  return out;
}

void WordCounter::add(std::string_view block) {
  const auto* s = reinterpret_cast<const unsigned char*>(block.data());
  const std::size_t n = block.size();
  for (std::size_t i = 0; i < n;) {
    if (after_return_) {  // "\r\n" is one line end
      after_return_ = false;
      if (s[i] == '\n') {
        ++i;
        continue;
      }
    }
    std::size_t space = 0;
    switch (kByteClass[s[i]]) {
      case kWordByte:
        break;
      case kSpace:
        space = 1;
        break;
      case kUnicodeSpace:
        space = unicode_space_size(s + i, n - i);
        break;
      case kLineFeed:
      case kReturn:
        after_return_ = s[i] == '\r';
        ++count_;
        in_word_ = line_has_bytes_ = false;
        ++i;
        continue;
    }
    line_has_bytes_ = true;
    if (space > 0) {
      in_word_ = false;
      i += space;
    } else {
      if (!in_word_) ++count_;
      in_word_ = true;
      ++i;
    }
  }
}

std::int64_t WordCounter::finish() {
  if (line_has_bytes_) ++count_;
  in_word_ = line_has_bytes_ = after_return_ = false;
  return count_;
}

TokenStream tokenize_text_fixed(std::string_view text, std::string_view source,
                                const Vocabulary& vocabulary) {
  check_text(text, source);
  KILN_CHECK(vocabulary.contains(Vocabulary::kEos),
             "corpus: cannot read {} with a vocabulary of {} words that has no {}", source,
             vocabulary.size(), Vocabulary::kEos);
  const std::optional<std::int64_t> unk = vocabulary.find(Vocabulary::kUnk);
  std::int64_t unknown = 0;
  const bool mark = text.starts_with(kByteOrderMark);
  const auto bytes = static_cast<std::int64_t>(text.size());
  text.remove_prefix(mark ? kByteOrderMark.size() : 0);
  TokenStream out = split_text(text, [&](std::string_view word, std::int64_t line) {
    if (const std::optional<std::int64_t> id = vocabulary.find(word)) return *id;
    KILN_CHECK(unk.has_value(),
               "corpus: {}:{}: word {} is not in the vocabulary ({} words), which has no {} to "
               "stand for it",
               source, line, quote_word(word), vocabulary.size(), Vocabulary::kUnk);
    ++unknown;
    return *unk;
  });
  out.unknown = unknown;
  out.byte_order_mark = mark;
  out.bytes = bytes;
  return out;
}

std::vector<std::string_view> split_words(std::string_view text, std::string_view source) {
  check_text(text, source);
  std::vector<std::string_view> words;
  split_text(text, [&](std::string_view word, std::int64_t) {
    words.push_back(word);
    return std::int64_t{0};
  });
  // split_text ends a last line without a line ending with "<eos>", as a corpus file's.
  const bool ends_line = !text.empty() && (text.back() == '\n' || text.back() == '\r');
  if (!ends_line && !words.empty()) words.pop_back();
  return words;
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  const std::filesystem::file_status status = reachable_status(path);
  KILN_CHECK(std::filesystem::exists(status), "{}: '{}' not found", what, path.string());
  KILN_CHECK(std::filesystem::is_regular_file(status),
             "{}: '{}' is not a regular file; expected a UTF-8 text file", what, path.string());
  // Opened through the helper too: the path may have become a FIFO since the check above.
  const FilePointer file = fopen_input_file(path.string(), what);
  std::string bytes;
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec) bytes.reserve(size);
  char chunk[1 << 16];
  std::size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, file.get())) > 0) bytes.append(chunk, got);
  KILN_CHECK(!std::ferror(file.get()), "{}: cannot read '{}': {}", what, path.string(),
             std::strerror(errno));
  KILN_CHECK(!bytes.empty(), "{}: '{}' is empty{}", what, path.string(),
             what == "corpus" ? "; expected UTF-8 text with one paragraph per line" : "");
  return bytes;
}

TokenStream tokenize_file(const std::filesystem::path& path, Vocabulary& vocabulary) {
  return tokenize_text(read_text_file(path), path.string(), vocabulary);
}

TokenStream tokenize_file_fixed(const std::filesystem::path& path, const Vocabulary& vocabulary) {
  return tokenize_text_fixed(read_text_file(path), path.string(), vocabulary);
}

namespace {

constexpr std::array<std::string_view, 3> kSplits = {"train", "valid", "test"};

// Checks the folder and its three files before reading any, so a missing file is reported at
// once rather than after tokenizing the others.
void check_corpus_dir(const std::filesystem::path& dir) {
  check_data_folder(dir);
  for (std::string_view split : kSplits) {
    const std::filesystem::path file = dir / (std::string(split) + ".txt");
    KILN_CHECK(std::filesystem::exists(reachable_status(file)),
               "corpus: '{}' not found; a corpus folder holds train.txt, valid.txt and test.txt",
               file.string());
  }
}

}  // namespace

void check_data_folder(const std::filesystem::path& dir) {
  const std::filesystem::file_status status = reachable_status(dir);
  KILN_CHECK(std::filesystem::exists(status),
             "corpus: data folder '{}' not found; give --data DIR, set KILN_DATA, or fetch "
             "WikiText-2 with scripts/get_wikitext2.sh datasets/wikitext-2",
             dir.string());
  KILN_CHECK(std::filesystem::is_directory(status),
             "corpus: '{}' is a file, not a folder; give the folder that holds train.txt, "
             "valid.txt and test.txt",
             dir.string());
}

Corpus::Corpus(const std::filesystem::path& dir) : dir_(dir.string()) {
  check_corpus_dir(dir);
  Vocabulary vocabulary;
  train_ = tokenize_file(dir / "train.txt", vocabulary);
  valid_ = tokenize_file(dir / "valid.txt", vocabulary);
  test_ = tokenize_file(dir / "test.txt", vocabulary);
  tokenizer_.emplace(std::move(vocabulary));
}

Corpus::Corpus(const std::filesystem::path& dir, Vocabulary vocabulary) : dir_(dir.string()) {
  check_corpus_dir(dir);
  train_ = tokenize_file_fixed(dir / "train.txt", vocabulary);
  valid_ = tokenize_file_fixed(dir / "valid.txt", vocabulary);
  test_ = tokenize_file_fixed(dir / "test.txt", vocabulary);
  tokenizer_.emplace(std::move(vocabulary));
}

SplitTokens Corpus::tokens(std::string_view name) const {
  const TokenStream& stream = split(name);
  return {.ids = TokenView(stream.ids),
          .text_bytes = stream.bytes,
          .words = static_cast<std::int64_t>(stream.ids.size()),
          .unknown = stream.unknown,
          .byte_order_mark = stream.byte_order_mark};
}

const TokenStream& Corpus::split(std::string_view name) const {
  if (name == "train") return train_;
  if (name == "valid") return valid_;
  KILN_CHECK(name == "test", "corpus: unknown split '{}'; expected one of {}", name,
             fmt::join(kSplits, ", "));
  return test_;
}

}  // namespace kiln
