// libFuzzer target for the tokenizer.json reader (data/tokenizer.h): Hugging Face's BPE
// tokenizer.json and kiln's char and word JSON. An input is a whole file: tokenizer_from_json
// reads it, and an accepted tokenizer must encode and decode texts (the input itself among them)
// and survive to_json and back. A kiln::Error is the right answer to garbage; a crash, any other
// exception, a hang, a leak or a sanitizer report is a bug, and so is an accepted tokenizer that
// breaks one of the properties below.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

using kiln::fuzz::require;

namespace {

void check_text(const kiln::Tokenizer& tokenizer, std::string_view text) {
  std::vector<std::int64_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const kiln::Error&) {
    return;  // a word tokenizer refuses text that is not UTF-8, or an unknown word without <unk>
  }
  for (const std::int64_t id : ids)
    require(id >= 0 && id < tokenizer.vocab_size(), "every id is in the vocabulary");
  const std::string back = tokenizer.decode(ids);
  if (tokenizer.kind() != "word") require(back == text, "char and bpe decode to the exact text");
  // Cuts (data/tokenizer.h): encoding the two sides of one gives the ids of the whole.
  const std::size_t cut = tokenizer.next_cut(text, text.size() / 2);
  require(cut >= text.size() / 2 && cut <= text.size(), "next_cut lies in the text");
  const std::size_t last = tokenizer.last_cut(text);
  require(last == 0 || last < text.size(), "last_cut lies inside the text");
  if (tokenizer.kind() == "word") return;
  for (const std::size_t p : {cut, last}) {
    if (p == 0 || p >= text.size()) continue;
    std::vector<std::int64_t> parts = tokenizer.encode(text.substr(0, p));
    const std::vector<std::int64_t> rest = tokenizer.encode(text.substr(p));
    parts.insert(parts.end(), rest.begin(), rest.end());
    require(parts == ids, "the ids of a text cut at a cut are the ids of the whole");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<kiln::Tokenizer> tokenizer;
  try {
    tokenizer = kiln::tokenizer_from_json(json, "fuzz input");
  } catch (const kiln::Error&) {
    return 0;
  }
  require(tokenizer->vocab_size() > 0, "an accepted tokenizer has tokens");
  const std::string canonical = tokenizer->to_json();
  std::unique_ptr<kiln::Tokenizer> again;
  try {
    again = kiln::tokenizer_from_json(canonical, "to_json");
  } catch (const kiln::Error&) {
    require(false, "an accepted tokenizer's to_json is read back");
  }
  require(again->to_json() == canonical && again->hash() == tokenizer->hash(),
          "to_json and back gives the same tokenizer");
  for (const std::string_view text :
       {std::string_view("the cat sat.\nThe café's 中文 text\r\n  \t x"), std::string_view("<eos>"),
        json.substr(0, 512)})
    check_text(*tokenizer, text);
  for (std::int64_t id = 0; id < std::min<std::int64_t>(tokenizer->vocab_size(), 64); ++id)
    tokenizer->token_label(id);
  return 0;
}
