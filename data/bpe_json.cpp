// BpeTokenizer and Hugging Face's tokenizer.json: what is read, what is refused, what is written.
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/tokenizer_json.h"
#include "data/vocabulary.h"

namespace kiln {

namespace {

using json = nlohmann::json;

bool null_or_absent(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null();
}

// A prefix or suffix field unset: absent, null or "" (tokenizers' save() and transformers'
// GPT2Converter write GPT-2's continuing_subword_prefix and end_of_word_suffix as "").
bool unset_affix(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ||
         (it->is_string() && it->get_ref<const std::string&>().empty());
}

bool flag(const json& j, const char* key, bool absent) {
  const auto it = j.find(key);
  return it == j.end() || !it->is_boolean() ? absent : it->get<bool>();
}

// A ByteLevel pre-tokenizer, decoder or post-processor as GPT-2's file has it (what `role`
// allows: null, or ByteLevel; the pre-tokenizer with use_regex and without a prefix space).
void check_byte_level(const json& j, const char* role, bool may_be_null, std::string_view source) {
  const auto it = j.find(role);
  if (it == j.end() || it->is_null()) {
    KILN_CHECK(may_be_null,
               "tokenizer {}: no {}; kiln reads byte-level BPE (a ByteLevel pre_tokenizer)", source,
               role);
    return;
  }
  const auto type_it = it->is_object() ? it->find("type") : it->end();
  KILN_CHECK(type_it != it->end() && *type_it == "ByteLevel",
             "tokenizer {}: {} {} is not supported; kiln reads byte-level BPE, with ByteLevel "
             "(as GPT-2's tokenizer.json)",
             source, role, it->dump().substr(0, 200));
  if (std::string_view(role) == "pre_tokenizer") {
    KILN_CHECK(!flag(*it, "add_prefix_space", false),
               "tokenizer {}: the ByteLevel pre_tokenizer has add_prefix_space true, which adds a "
               "space that decoding does not remove; kiln reads add_prefix_space false (GPT-2's)",
               source);
    KILN_CHECK(flag(*it, "use_regex", true),
               "tokenizer {}: the ByteLevel pre_tokenizer has use_regex false; kiln reads GPT-2's "
               "pre-tokenization (use_regex true)",
               source);
  }
}

std::string string_at(const json& j, std::string_view what, std::string_view source) {
  KILN_CHECK(j.is_string(), "tokenizer {}: {} {} is not a string", source, what,
             j.dump().substr(0, 100));
  return j.get<std::string>();
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, std::string_view source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("tokenizer {}: not valid JSON: {}", source, e.what());
  }
  return bpe_tokenizer_from_json(j, source);
}

BpeTokenizer bpe_tokenizer_from_json(const json& j, std::string_view source) {
  KILN_CHECK(j.is_object(), "tokenizer {}: expected a JSON object", source);
  const auto model_it = j.find("model");
  KILN_CHECK(model_it != j.end() && model_it->is_object(), "tokenizer {}: no \"model\" object",
             source);
  const json& model = *model_it;
  // Compared as JSON: a type that is not a string (an object, say) is unequal, never a throw.
  const auto type_it = model.find("type");
  KILN_CHECK(type_it != model.end() && *type_it == "BPE",
             "tokenizer {}: model type {} is not \"BPE\"; kiln reads byte-level BPE", source,
             model.contains("type") ? model["type"].dump() : "(none)");
  KILN_CHECK(null_or_absent(j, "normalizer"),
             "tokenizer {}: normalizer {} is not supported (kiln reads byte-level BPE without a "
             "normalizer, as GPT-2's)",
             source, j.contains("normalizer") ? j["normalizer"].dump().substr(0, 200) : "");
  KILN_CHECK(null_or_absent(j, "truncation") && null_or_absent(j, "padding"),
             "tokenizer {}: truncation and padding must be null", source);
  check_byte_level(j, "pre_tokenizer", false, source);
  check_byte_level(j, "decoder", true, source);
  check_byte_level(j, "post_processor", true, source);
  KILN_CHECK(null_or_absent(model, "dropout") && unset_affix(model, "continuing_subword_prefix") &&
                 unset_affix(model, "end_of_word_suffix") && !flag(model, "byte_fallback", false),
             "tokenizer {}: the BPE model sets dropout, continuing_subword_prefix, "
             "end_of_word_suffix or byte_fallback, which byte-level BPE does not use",
             source);

  // The vocabulary: every id from 0 up, each once, with the added tokens.
  const auto vocab_it = model.find("vocab");
  KILN_CHECK(vocab_it != model.end() && vocab_it->is_object(),
             "tokenizer {}: model.vocab must be an object of token: id", source);
  std::vector<std::string> symbols;
  std::vector<bool> set;
  // The ids run from 0 without a gap, so each is below the count of entries: a larger one is
  // refused before the tables grow to it (id 10^9 once ended in std::bad_alloc).
  std::size_t entries = vocab_it->size();
  if (const auto it = j.find("added_tokens"); it != j.end() && it->is_array())
    entries += it->size();
  const auto place = [&](const std::string& token, const json& id_json) {
    KILN_CHECK(id_json.is_number_unsigned() &&
                   id_json.get<std::uint64_t>() < std::numeric_limits<std::int32_t>::max(),
               "tokenizer {}: token {} has id {}, not an integer in [0, 2^31 - 1)", source,
               quote_word(token), id_json.dump());
    KILN_CHECK(id_json.get<std::uint64_t>() < entries,
               "tokenizer {}: token {} has id {}, but it has {} tokens, so no token has id k for "
               "some k below {} (the ids must run from 0 to {})",
               source, quote_word(token), id_json.dump(), entries, entries, entries - 1);
    const auto id = static_cast<std::size_t>(id_json.get<std::uint64_t>());
    if (id >= symbols.size()) symbols.resize(id + 1), set.resize(id + 1, false);
    KILN_CHECK(!set[id] || symbols[id] == token, "tokenizer {}: id {} is given to {} and to {}",
               source, id, quote_word(symbols[id]), quote_word(token));
    symbols[id] = token;
    set[id] = true;
  };
  for (const auto& [token, id] : vocab_it->items()) place(token, id);
  std::vector<BpeTokenizer::AddedToken> added;
  if (const auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) {
    KILN_CHECK(it->is_array(), "tokenizer {}: added_tokens must be an array", source);
    for (const json& a : *it) {
      KILN_CHECK(a.is_object() && a.contains("id") && a.contains("content"),
                 "tokenizer {}: added token {} lacks id or content", source,
                 a.dump().substr(0, 100));
      const std::string content = string_at(a["content"], "added token content", source);
      KILN_CHECK(
          !flag(a, "single_word", false) && !flag(a, "lstrip", false) && !flag(a, "rstrip", false),
          "tokenizer {}: added token {} sets single_word, lstrip or rstrip, which kiln "
          "does not support",
          source, quote_word(content));
      place(content, a["id"]);
      added.push_back({static_cast<std::int32_t>(a["id"].get<std::uint64_t>()), content,
                       flag(a, "special", true), flag(a, "normalized", false)});
    }
  }
  for (std::size_t id = 0; id < set.size(); ++id)
    KILN_CHECK(set[id], "tokenizer {}: no token has id {} (the ids must run from 0 to {})", source,
               id, set.size() - 1);

  std::unordered_map<std::string_view, std::int32_t> id_of;
  for (std::size_t id = 0; id < symbols.size(); ++id)
    id_of.emplace(symbols[id], static_cast<std::int32_t>(id));
  const auto merges_it = model.find("merges");
  KILN_CHECK(merges_it != model.end() && merges_it->is_array(),
             "tokenizer {}: model.merges must be an array", source);
  std::vector<BpeTokenizer::Merge> merges;
  for (std::size_t k = 0; k < merges_it->size(); ++k) {
    const json& m = (*merges_it)[k];
    std::string left, right;
    if (m.is_string()) {  // "left right", tokenizers before 0.20
      const std::string line = m.get<std::string>();
      const std::size_t space = line.find(' ');
      KILN_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                 "tokenizer {}: merge {} {} is not two tokens separated by one space", source, k,
                 quote_word(line));
      left = line.substr(0, space), right = line.substr(space + 1);
    } else {
      KILN_CHECK(m.is_array() && m.size() == 2,
                 "tokenizer {}: merge {} {} is neither \"left right\" nor [left, right]", source, k,
                 m.dump().substr(0, 100));
      left = string_at(m[0], "merge token", source), right = string_at(m[1], "merge token", source);
    }
    const auto find = [&](const std::string& token) {
      const auto it = id_of.find(token);
      KILN_CHECK(it != id_of.end(),
                 "tokenizer {}: merge {} ({} {}) names {}, which is not in the vocabulary", source,
                 k, quote_word(left), quote_word(right), quote_word(token));
      return it->second;
    };
    merges.push_back({find(left), find(right), find(left + right)});
  }
  try {
    return BpeTokenizer(std::move(symbols), std::move(merges), std::move(added),
                        flag(model, "ignore_merges", false));
  } catch (const Error& e) {
    fail("tokenizer {}: {}", source, e.what());
  }
}

std::string BpeTokenizer::to_json() const {
  using ordered = nlohmann::ordered_json;
  const ordered byte_level_pre = {{"type", "ByteLevel"},
                                  {"add_prefix_space", false},
                                  {"trim_offsets", true},
                                  {"use_regex", true}};
  const ordered byte_level_post = {{"type", "ByteLevel"},
                                   {"add_prefix_space", true},
                                   {"trim_offsets", false},
                                   {"use_regex", true}};
  const ordered byte_level_decoder = {{"type", "ByteLevel"},
                                      {"add_prefix_space", true},
                                      {"trim_offsets", true},
                                      {"use_regex", true}};
  ordered added = ordered::array();
  for (const AddedToken& a : added_)
    added.push_back({{"id", a.id},
                     {"content", a.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", a.normalized},
                     {"special", a.special}});
  // The vocabulary in id order, written by hand: ordered_json finds each new key by a linear
  // search, which took 5 s for GPT-2's 50,257 tokens (quadratic), twice per kiln-prepare run.
  std::string vocab = "{";
  for (std::size_t id = 0; id < symbols_.size(); ++id)
    vocab += fmt::format("{}{}:{}", id == 0 ? "" : ",", ordered(symbols_[id]).dump(), id);
  vocab += "}";
  ordered merges = ordered::array();
  for (const Merge& m : merges_) merges.push_back(symbols_[m.left] + " " + symbols_[m.right]);
  ordered j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level_pre;
  j["post_processor"] = byte_level_post;
  j["decoder"] = byte_level_decoder;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", ignore_merges_},
                {"vocab", nullptr},
                {"merges", std::move(merges)}};
  // Every quote inside a string is escaped, so "vocab":null occurs once: the placeholder.
  std::string text = j.dump();
  const std::string placeholder = R"("vocab":null)";
  return text.replace(text.find(placeholder), placeholder.size(), R"("vocab":)" + vocab);
}

}  // namespace kiln
