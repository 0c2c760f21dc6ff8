#include "data/word_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/corpus.h"
#include "data/tokenizer_json.h"

namespace kiln {

namespace {

// A line ends before p: "\n", or "\r" not followed by "\n".
bool line_ends_before(std::string_view text, std::size_t p) {
  return text[p - 1] == '\n' || (text[p - 1] == '\r' && text[p] != '\n');
}

}  // namespace

WordTokenizer::WordTokenizer(Vocabulary vocabulary) : vocabulary_(std::move(vocabulary)) {}

void WordTokenizer::encode_append(std::string_view text, std::vector<std::int64_t>& ids) const {
  const TokenStream stream = tokenize_text_fixed(text, "text", vocabulary_);
  ids.insert(ids.end(), stream.ids.begin(), stream.ids.end());
}

void WordTokenizer::decode_append(std::span<const std::int64_t> ids, std::string& out) const {
  bool line_start = out.empty() || out.back() == '\n';
  for (const std::int64_t id : ids) {
    const std::string& word = vocabulary_.word(id);
    if (word == Vocabulary::kEos) {
      out += '\n';
      line_start = true;
    } else {
      if (!line_start) out += ' ';
      out += word;
      line_start = false;
    }
  }
}

std::size_t WordTokenizer::next_cut(std::string_view text, std::size_t from) const {
  for (std::size_t p = std::max<std::size_t>(from, 1); p < text.size(); ++p)
    if (line_ends_before(text, p)) return p;
  return text.size();
}

std::size_t WordTokenizer::last_cut(std::string_view text) const {
  for (std::size_t p = text.size(); p-- > 1;)
    if (line_ends_before(text, p)) return p;
  return 0;
}

std::string WordTokenizer::token_label(std::int64_t id) const { return vocabulary_.word(id); }

std::string WordTokenizer::to_json() const {
  nlohmann::ordered_json j;
  j["kiln_tokenizer"] = "word";
  j["version"] = 1;
  j["words"] = vocabulary_.words();
  return j.dump();
}

WordTokenizer word_tokenizer_from_json(const nlohmann::json& j, std::string_view source) {
  const auto version = j.find("version");
  KILN_CHECK(version != j.end() && *version == 1,
             "tokenizer {}: word tokenizer version {} is not the 1 this kiln reads", source,
             version == j.end() ? "(none)" : version->dump());
  const auto words = j.find("words");
  KILN_CHECK(words != j.end() && words->is_array() && !words->empty(),
             "tokenizer {}: a word tokenizer needs \"words\", a non-empty array of strings",
             source);
  std::vector<std::string> list;
  for (const auto& w : *words) {
    KILN_CHECK(w.is_string(), "tokenizer {}: word {} is not a string", source, w.dump());
    list.push_back(w.get<std::string>());
  }
  try {
    return WordTokenizer(Vocabulary(list));
  } catch (const Error& e) {
    fail("tokenizer {}: {}", source, e.what());
  }
}

void WordTokenizerBuilder::add_text(std::string_view text, std::string_view source) {
  tokenize_text(text, source, vocabulary_);
}

WordTokenizer WordTokenizerBuilder::build() {
  vocabulary_.add(Vocabulary::kEos);
  vocabulary_.add(Vocabulary::kUnk);
  return WordTokenizer(vocabulary_);
}

}  // namespace kiln
