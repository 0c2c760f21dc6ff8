// The tokenizers (data/tokenizer.h): GPT-2's pre-tokenization and byte-level BPE against Hugging
// Face tokenizers (golden ids that tools/make_tokenizer_golden.py wrote once, tests/data/bpe/),
// exact round trips on any bytes, cuts that encode as the whole, training that reproduces its
// committed output, the character and word tokenizers, and tokenizer.json files that are refused.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/byte_level.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/prepare.h"
#include "data/pretokenizer.h"
#include "data/unicode_classes.h"
#include "data/word_tokenizer.h"
#include "data/xxhash64.h"
#include "tests/data/data_test_util.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::error_message;
using Ids = std::vector<std::int64_t>;

namespace {

const std::string kBpeDir = std::string(KILN_TEST_SOURCE_DIR) + "/tests/data/bpe/";

std::string read(const std::string& name) { return read_text_file(kBpeDir + name); }

nlohmann::json read_json(const std::string& name) { return nlohmann::json::parse(read(name)); }

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = pretoken_end(text, i);
    out.emplace_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  // Mostly text-like bytes, with every byte value possible (invalid UTF-8 included).
  const std::string alphabet = "abc xyz 019'\n\r\t.,!\xC3\xA9\xE3\x80\x80\xF0\x9F\x98\x80";
  for (char& c : s)
    c = rng() % 3 == 0 ? static_cast<char>(rng() & 0xFF) : alphabet[rng() % alphabet.size()];
  return s;
}

// The ids of every golden text encoded by tokenizer, checked against tokenizers' ids.
void check_golden(const Tokenizer& tokenizer, const std::string& golden_file) {
  const nlohmann::json golden = read_json(golden_file);
  const nlohmann::json cases = read_json("cases.json");
  const std::string sample = read("sample.txt");
  CHECK(tokenizer.encode(sample) == golden["sample"].get<Ids>());
  CHECK(tokenizer.decode(tokenizer.encode(sample)) == sample);
  REQUIRE(cases.size() == golden["cases"].size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::string text = cases[k].get<std::string>();
    INFO("case " << k << ": '" << printable_text(text) << "'");
    CHECK(tokenizer.encode(text) == golden["cases"][k].get<Ids>());
  }
}

}  // namespace

TEST_CASE("character classes follow Unicode: letters, numbers, White_Space") {
  CHECK(char_class(U'a') == CharClass::letter);
  CHECK(char_class(U'é') == CharClass::letter);
  CHECK(char_class(U'中') == CharClass::letter);
  CHECK(char_class(0x0663) == CharClass::number);  // Arabic-Indic three
  CHECK(char_class(0x2167) == CharClass::number);  // Roman numeral eight (Nl)
  CHECK(char_class(0x00B2) == CharClass::number);  // superscript two (No)
  CHECK(char_class(0x00A0) == CharClass::space);
  CHECK(char_class(0x3000) == CharClass::space);
  CHECK(char_class(0x0085) == CharClass::space);
  CHECK(char_class(0x001C) == CharClass::other);  // not White_Space (Python's isspace says yes)
  CHECK(char_class(0x180E) == CharClass::other);  // no longer White_Space since Unicode 6.3
  CHECK(char_class(0x0301) == CharClass::other);  // a combining mark
  CHECK(char_class(0x1F600) == CharClass::other);
  CHECK(char_class(0x20000) == CharClass::letter);  // CJK extension B
  CHECK(char_class(kInvalidCodePoint) == CharClass::other);
}

TEST_CASE("UTF-8 decoding never fails: each invalid byte is one character") {
  const std::string text = "a\xC3\xA9\xE2\x82\xC0\xED\xA0\x80\xF4\x90\x80\x80";
  std::vector<std::uint32_t> lengths;
  std::vector<char32_t> points;
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    lengths.push_back(c.length);
    points.push_back(c.code_point);
    i += c.length;
  }
  CHECK(lengths == std::vector<std::uint32_t>{1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK(points[1] == U'é');
  CHECK(points[2] == kInvalidCodePoint);  // a truncated sequence
}

TEST_CASE("GPT-2's pre-tokenization as tokenizers cuts text") {
  // Each expectation is tokenizers' ByteLevel pre_tokenize_str (add_prefix_space false).
  using V = std::vector<std::string>;
  CHECK(pieces("I'm don't 'S") == V{"I", "'m", " don", "'t", " '", "S"});
  CHECK(pieces("a  \n\n b\r\n") == V{"a", "  \n\n", " b", "\r\n"});
  CHECK(pieces("x\u3000\u3000y") == V{"x", "\u3000", "\u3000", "y"});
  CHECK(pieces("a\u00a0b") == V{"a", "\u00a0", "b"});
  CHECK(pieces("\u0663\u0664 \u0969 \uff13 \u00b2") ==
        V{"\u0663\u0664", " \u0969", " \uff13", " \u00b2"});
  CHECK(pieces("cafe\u0301s") == V{"cafe", "\u0301", "s"});
  CHECK(pieces("\U0001F600\U0001F600 ok") == V{"\U0001F600\U0001F600", " ok"});
  CHECK(pieces("hello   world  ") == V{"hello", "  ", " world", "  "});
  CHECK(pieces("a\xFF\xFEz") == V{"a", "\xFF\xFE", "z"});  // invalid bytes are "other"
}

TEST_CASE("fixed boundaries cut every text into pieces as the whole") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = random_bytes(rng, 1 + rng() % 300);
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < text.size(); i = pretoken_end(text, i)) starts.push_back(i);
    for (std::size_t p = 1; p < text.size(); ++p)
      if (is_fixed_boundary(text, p))
        CHECK(std::find(starts.begin(), starts.end(), p) != starts.end());
  }
}

TEST_CASE("byte symbols are GPT-2's bytes_to_unicode") {
  CHECK(byte_symbols(" \n!~\xA0\xAD\xFF") == "ĠĊ!~łŃÿ");
  std::string bytes;
  REQUIRE(symbols_to_bytes("helloĠworldĊ", bytes));
  CHECK(bytes == "hello world\n");
  CHECK_FALSE(symbols_to_bytes("a\u4e2d", bytes));
  for (int b = 0; b < 256; ++b) CHECK(symbol_byte(byte_symbol(static_cast<std::uint8_t>(b))) == b);
}

TEST_CASE("XXH64 matches the reference's known values") {
  CHECK(xxh64("", 0) == 0xEF46DB3751D8E999ULL);
  CHECK(xxh64("abc", 3) == 0x44BC2CF5AD770999ULL);
  const std::string long_text(1000, 'x');
  Xxh64 stream;
  stream.update(long_text.data(), 333);
  stream.update(long_text.data() + 333, 667);
  CHECK(stream.digest() == xxh64(long_text.data(), long_text.size()));
}

TEST_CASE("BPE encodes id for id as Hugging Face tokenizers does") {
  SECTION("a vocabulary tokenizers trained") {
    check_golden(BpeTokenizer::from_json(read("hf_tokenizer.json"), "hf_tokenizer.json"),
                 "hf_golden.json");
  }
  SECTION("the vocabulary kiln trained, as tokenizers encodes with it") {
    check_golden(BpeTokenizer::from_json(read("kiln_tokenizer.json"), "kiln_tokenizer.json"),
                 "kiln_golden.json");
  }
}

TEST_CASE("BPE training reproduces the committed tokenizer, for any thread count") {
  const std::string text = read("train.txt");
  for (const int threads : {1, 3}) {
    BpeTrainer trainer({.vocab_size = 600, .threads = threads});
    trainer.add_text(text);
    const BpeTokenizer trained = trainer.train();
    CHECK(trained.to_json() == read("kiln_tokenizer.json"));
  }
  // A text over 1 MiB counts its pieces on several threads: the same vocabulary.
  std::string big;
  while (big.size() < (std::size_t{3} << 20) / 2) big += text;
  BpeTrainer one({.vocab_size = 700, .threads = 1}), three({.vocab_size = 700, .threads = 3});
  one.add_text(big);
  three.add_text(big);
  CHECK(one.train().to_json() == three.train().to_json());
}

TEST_CASE("decode(encode(x)) == x for any bytes, with every tokenizer") {
  const BpeTokenizer bpe = BpeTokenizer::from_json(read("hf_tokenizer.json"), "hf");
  CharTokenizerBuilder builder;
  builder.add_text(read("sample.txt"));
  const CharTokenizer chars = builder.build(0);
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_bytes(rng, rng() % 500);
    CHECK(bpe.decode(bpe.encode(text)) == text);
    CHECK(chars.decode(chars.encode(text)) == text);
  }
  // A megabyte of spaces is one piece: merged with the heap, not quadratically.
  const std::string spaces(1 << 20, ' ');
  CHECK(bpe.decode(bpe.encode(spaces)) == spaces);
}

TEST_CASE("cuts encode as the whole, and so do several threads") {
  const BpeTokenizer bpe = BpeTokenizer::from_json(read("hf_tokenizer.json"), "hf");
  CharTokenizerBuilder builder;
  builder.add_text(read("sample.txt"));
  const CharTokenizer chars = builder.build(0);
  const WordTokenizer words(Vocabulary({"<eos>", "<unk>", "a", "b"}));
  std::mt19937_64 rng(5);
  const std::vector<const Tokenizer*> tokenizers = {&bpe, &chars};
  for (int trial = 0; trial < 100; ++trial) {
    const std::string text = random_bytes(rng, 2 + rng() % 400);
    for (const Tokenizer* t : tokenizers) {
      const Ids whole = t->encode(text);
      for (const std::size_t cut : {t->last_cut(text), t->next_cut(text, rng() % text.size())}) {
        if (cut == 0 || cut >= text.size()) continue;
        Ids joined = t->encode(text.substr(0, cut));
        const Ids rest = t->encode(text.substr(cut));
        joined.insert(joined.end(), rest.begin(), rest.end());
        INFO(t->kind() << " cut at " << cut << " of '" << printable_text(text) << "'");
        CHECK(joined == whole);
      }
    }
  }
  std::string big;
  while (big.size() < (std::size_t{3} << 20) / 2) big += read("sample.txt") + read("train.txt");
  CHECK(bpe.encode(big, 3) == bpe.encode(big, 1));
  CHECK(chars.encode(big, 3) == chars.encode(big, 1));
  const std::string lines = "a b\nb a\r\na\rb b b\n";
  CHECK(words.last_cut(lines) == 11);    // after the lone "\r"
  CHECK(words.next_cut(lines, 5) == 9);  // after "\r\n"
}

namespace {

// A BPE with GPT-2's "<|endoftext|>" added, so cuts must also keep clear of added tokens.
BpeTokenizer bpe_with_endoftext() {
  nlohmann::json j = read_json("hf_tokenizer.json");
  const auto id = static_cast<std::int64_t>(j["model"]["vocab"].size());
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", true}}});
  return BpeTokenizer::from_json(j.dump(), "with-eot");
}

// Text of fragments whose pieces depend on what follows: contractions cut short, CJK without
// spaces, U+3000 and other spaces in runs, an added token and its prefixes, 4-byte emoji.
std::string fragment_text(std::mt19937_64& rng, std::size_t fragments) {
  static const std::vector<std::string> kFragments = {"\xE4\xB8\xAD",
                                                      "'",
                                                      "r",
                                                      "e",
                                                      "ll",
                                                      "l",
                                                      "v",
                                                      "s",
                                                      "\xE3\x80\x80",
                                                      " ",
                                                      "\t",
                                                      "\n",
                                                      "x",
                                                      "1",
                                                      "<|endoftext|>",
                                                      "<|",
                                                      "endoftext",
                                                      "\xF0\x9F\x98\x80",
                                                      "\xC2\xA0"};
  std::string text;
  for (std::size_t k = 0; k < fragments; ++k) text += kFragments[rng() % kFragments.size()];
  return text;
}

}  // namespace

TEST_CASE("a block's last cut is a cut of every text that continues the block") {
  // A block read so far is a prefix of the text; its last cut must cut the whole text, whatever
  // follows. Before, with no fixed boundary, the start of the last piece was taken: "中'r" read
  // so far cut before "r", and "中'r" + "e中" gave "'", "re中" where the whole gives "'re", "中".
  const BpeTokenizer bpe = bpe_with_endoftext();
  std::mt19937_64 rng(52);
  std::vector<std::string> texts = {
      "\xE4\xB8\xAD'r"
      "e\xE4\xB8\xAD\xE6\x96\x87",
      "\xE3\x80\x80\xE3\x80\x80\xE4\xB8\xAD'll\xE4\xB8\xAD", "\t\t\xE3\x80\x80x",
      "x   <|endoftext|>y"};
  for (int trial = 0; trial < 300; ++trial) texts.push_back(fragment_text(rng, 2 + rng() % 14));
  for (const std::string& text : texts) {
    const Ids whole = bpe.encode(text);
    for (std::size_t read = 1; read <= text.size(); ++read) {
      const std::size_t cut = bpe.last_cut(std::string_view(text).substr(0, read));
      if (cut == 0) continue;
      REQUIRE(cut < read);
      Ids joined = bpe.encode(std::string_view(text).substr(0, cut));
      const Ids rest = bpe.encode(std::string_view(text).substr(cut));
      joined.insert(joined.end(), rest.begin(), rest.end());
      INFO("'" << printable_text(text) << "' read to " << read << ", cut at " << cut);
      REQUIRE(joined == whole);
    }
  }
}

TEST_CASE("prepared BPE ids do not depend on where the blocks end") {
  // The issue's text: CJK indented with U+3000, contractions and no ASCII cut point, read in
  // blocks of 1 to 40 bytes, as kiln-prepare reads 8 MiB blocks.
  const BpeTokenizer bpe = bpe_with_endoftext();
  std::string text;
  std::mt19937_64 rng(8);
  for (int line = 0; line < 12; ++line)
    text += "\xE3\x80\x80\xE3\x80\x80" + fragment_text(rng, 20) +
            "\xE4\xB8\xAD'r"
            "e\xE4\xB8\xAD";
  const testing::TempDir dir;
  const std::string path = dir.write("cjk.txt", text).string();
  const Ids whole = bpe.encode(text);
  for (std::uint64_t block_bytes = 1; block_bytes <= 40; ++block_bytes) {
    Ids ids;
    std::string seen;
    read_text_blocks({{path, 0, text.size()}}, bpe, block_bytes, 1 << 20,
                     [&](std::string_view block, bool) {
                       bpe.encode_append(block, ids);
                       seen += block;
                     });
    INFO("blocks of " << block_bytes << " bytes");
    CHECK(seen == text);
    CHECK(ids == whole);
  }
}

TEST_CASE("GPT-2's own tokenizer.json loads and encodes as tokenizers 0.23") {
  // tools/make_gpt2_golden.py: GPT-2's file as tokenizers saves it (continuing_subword_prefix
  // and end_of_word_suffix "", merges as pairs), and tokenizers 0.23.3's pieces and ids of a
  // text per script whose class changed from Unicode 14.0 to 16.0, and of varied texts. Its
  // load time is bench_tokenizer's "kiln load" line (docs/measurements.md), not a test's.
  const std::unique_ptr<Tokenizer> loaded = read_tokenizer(KILN_GPT2_TOKENIZER);
  const std::uint64_t hash = loaded->hash();
  const BpeTokenizer gpt2 = BpeTokenizer::from_json(read_text_file(KILN_GPT2_TOKENIZER), "gpt2");
  CHECK(BpeTokenizer::from_json(gpt2.to_json(), "again").hash() == hash);
  CHECK(gpt2.vocab_size() == 50257);
  CHECK(gpt2.encode("Hello world") == Ids{15496, 995});
  const nlohmann::json golden = read_json("gpt2_golden.json");
  REQUIRE(golden["unicode"].size() >= 30);
  for (const char* group : {"unicode", "texts"}) {
    for (const nlohmann::json& g : golden[group]) {
      const std::string text = g["text"];
      INFO(group << ": " << g.value("name", "") << " '" << printable_text(text) << "'");
      if (!g["pieces"].empty()) CHECK(pieces(text) == g["pieces"].get<std::vector<std::string>>());
      CHECK(gpt2.encode(text) == g["ids"].get<Ids>());
    }
  }
  // The block-cut text, read in blocks of every size up to 40 bytes.
  const nlohmann::json& cut = golden["texts"].back();
  const std::string text = cut["text"];
  const testing::TempDir dir;
  const std::string path = dir.write("cut.txt", text).string();
  for (std::uint64_t block_bytes = 1; block_bytes <= 40; ++block_bytes) {
    Ids ids;
    read_text_blocks({{path, 0, text.size()}}, gpt2, block_bytes, 1 << 20,
                     [&](std::string_view block, bool) { gpt2.encode_append(block, ids); });
    INFO("blocks of " << block_bytes << " bytes");
    CHECK(ids == cut["ids"].get<Ids>());
  }
}

TEST_CASE("empty continuing_subword_prefix and end_of_word_suffix read as unset") {
  nlohmann::json j = read_json("hf_tokenizer.json");
  const std::string text = read("sample.txt");
  const Ids expected = BpeTokenizer::from_json(j.dump(), "hf").encode(text);
  j["model"]["continuing_subword_prefix"] = "";
  j["model"]["end_of_word_suffix"] = "";
  CHECK(BpeTokenizer::from_json(j.dump(), "empty-affixes").encode(text) == expected);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    nlohmann::json set = j;
    set["model"][key] = "##";
    CHECK_THAT(error_message([&] { BpeTokenizer::from_json(set.dump(), "affix.json"); }),
               Contains("affix.json") && Contains(key));
  }
}

TEST_CASE("the char tokenizer: bytes first, then the code points seen") {
  CharTokenizerBuilder builder;
  builder.add_text("héé — 中\xFF");
  const CharTokenizer all = builder.build(0);
  CHECK(all.vocab_size() == 256 + 3);
  CHECK(all.encode("hé中") == Ids{'h', 256, 258});
  CHECK(all.encode("ü") == Ids{0xC3, 0xBC});     // not seen: its bytes
  const CharTokenizer top = builder.build(257);  // the most frequent one only
  CHECK(top.code_points() == std::vector<char32_t>{U'é'});
  const CharTokenizer back = CharTokenizer::from_json(all.to_json(), "json");
  CHECK(back.to_json() == all.to_json());
  CHECK(back.hash() == all.hash());
  CHECK_THAT(error_message([&] { all.decode(Ids{259}); }), Contains("id 259 is out of range"));
  CHECK_THAT(error_message([&] { builder.build(100); }), Contains("too small"));
}

TEST_CASE("the word tokenizer reads as the corpus does and decodes to the words") {
  Vocabulary vocab;
  tokenize_text("the cat\nthe dog\n", "text", vocab);
  vocab.add(Vocabulary::kUnk);
  const WordTokenizer words(vocab);
  const Ids ids = words.encode("the cow\n");
  CHECK(ids == Ids{vocab.id_of("the"), vocab.unk(), vocab.eos()});
  CHECK(words.decode(ids) == "the <unk>\n");
  const auto back = tokenizer_from_json(words.to_json(), "json");
  CHECK(back->kind() == "word");
  CHECK(back->hash() == words.hash());
}

TEST_CASE("errors/tokenizer: bad tokenizer.json files are refused, naming what is wrong") {
  nlohmann::json good = read_json("hf_tokenizer.json");
  const auto refuse = [](const nlohmann::json& j) {
    return error_message([&] { BpeTokenizer::from_json(j.dump(), "bad.json"); });
  };
  SECTION("a model type that is not a string (fuzz_tokenizer_json found it uncaught)") {
    nlohmann::json j = good;
    j["model"]["type"] = nlohmann::json::object();
    CHECK_THAT(refuse(j), Contains("model type {}") && Contains("is not \"BPE\""));
    CHECK_THAT(error_message([] {
                 tokenizer_from_json(R"({"kiln_tokenizer":"word","version":1,"words":[]})", "w");
               }),
               Contains("non-empty array"));  // found by fuzz_tokenizer_json: 0 tokens accepted
    j = good;
    j["decoder"]["type"] = nlohmann::json::array();
    CHECK_THAT(refuse(j), Contains("decoder") && Contains("is not supported"));
  }
  SECTION("a merge that names an unknown token") {
    nlohmann::json j = good;
    j["model"]["merges"][5] = std::vector<std::string>{"Ġth", "zzzq"};
    CHECK_THAT(refuse(j), Contains("merge 5") && Contains("not in the vocabulary"));
  }
  SECTION("a merge that uses a token only a later merge makes (a cycle)") {
    nlohmann::json j = good;
    auto& merges = j["model"]["merges"];
    // The first merge whose left token is itself a merge's, moved to the front.
    std::size_t k = 0;
    while (merges[k][0].get<std::string>().size() < 3) ++k;
    const nlohmann::json moved = merges[k];
    merges.erase(k);
    merges.insert(merges.begin(), moved);
    CHECK_THAT(refuse(j), Contains("merge 0") && Contains("cycle"));
  }
  SECTION("a repeated merge") {
    nlohmann::json j = good;
    j["model"]["merges"].push_back(j["model"]["merges"][3]);
    CHECK_THAT(refuse(j), Contains("repeats merge 3"));
  }
  SECTION("a vocabulary without every byte") {
    nlohmann::json j = good;
    auto& vocab = j["model"]["vocab"];
    vocab["not a byte"] = vocab["Ġ"];
    vocab.erase("Ġ");
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& m : j["model"]["merges"])
      if (m[0] != "Ġ" && m[1] != "Ġ") kept.push_back(m);
    j["model"]["merges"] = kept;
    CHECK_THAT(refuse(j), Contains("byte 0x20"));
  }
  SECTION("a gap in the ids") {
    nlohmann::json j = good;
    j["model"]["vocab"]["extra"] = 5000;
    CHECK_THAT(refuse(j), Contains("no token has id"));
  }
  SECTION("a normalizer, a prefix space, another model") {
    nlohmann::json a = good, b = good, c = good;
    a["normalizer"] = {{"type", "NFC"}};
    b["pre_tokenizer"]["add_prefix_space"] = true;
    c["model"]["type"] = "WordPiece";
    CHECK_THAT(refuse(a), Contains("normalizer"));
    CHECK_THAT(refuse(b), Contains("add_prefix_space"));
    CHECK_THAT(refuse(c), Contains("WordPiece"));
  }
  SECTION("not JSON at all") {
    CHECK_THAT(error_message([] { tokenizer_from_json("{\"model\": [", "x.json"); }),
               Contains("x.json") && Contains("not valid JSON"));
  }
  SECTION("ids beyond the vocabulary") {
    const BpeTokenizer bpe = BpeTokenizer::from_json(good.dump(), "good");
    CHECK_THAT(error_message([&] { bpe.decode(Ids{bpe.vocab_size()}); }), Contains("out of range"));
  }
}

TEST_CASE("added tokens are found in the text first and stand for themselves") {
  nlohmann::json j = read_json("hf_tokenizer.json");
  const auto id = static_cast<std::int64_t>(j["model"]["vocab"].size());
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", true}}});
  const BpeTokenizer bpe = BpeTokenizer::from_json(j.dump(), "with-eot");
  const std::string text = "one<|endoftext|>two <|endoftext|><|endoftext|>";
  const Ids ids = bpe.encode(text);
  CHECK(std::count(ids.begin(), ids.end(), id) == 3);
  CHECK(bpe.decode(ids) == text);
  CHECK(bpe.to_json() == BpeTokenizer::from_json(bpe.to_json(), "again").to_json());
  // No cut falls inside it.
  for (std::size_t p = 4; p < 16; ++p)
    CHECK((bpe.next_cut(text, p) <= 3 || bpe.next_cut(text, p) >= 16));
}
