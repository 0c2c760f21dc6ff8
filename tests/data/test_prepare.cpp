// Token shards (data/token_shard.h), prepared datasets (data/dataset.h) and the prepare step
// (data/prepare.h): round trips to the exact text, the header's counts, and every kind of bad
// file or text refused with an error that names it, leaving nothing half written.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "core/io/crc32.h"
#include "core/io/input_file.h"
#include "core/io/safetensors.h"
#include "data/bpe_tokenizer.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/token_shard.h"
#include "tests/data/data_test_util.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::error_message;
using kiln::testing::TempDir;
using Ids = std::vector<std::int64_t>;

namespace {

const std::string kBpeSamples = std::string(KILN_TEST_SOURCE_DIR) + "/tests/data/bpe/";

std::string file_bytes(const std::string& path) { return read_text_file(path); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string all_ids_text(const Dataset& data, const std::string& split) {
  const TokenView view = data.tokens(split).ids;
  Ids ids(static_cast<std::size_t>(view.size()));
  view.copy(0, view.size(), ids.data());
  return data.tokenizer().decode(ids);
}

}  // namespace

TEST_CASE("a shard round-trips its ids and counts through the header") {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  ShardWriter writer(path, {.id_bytes = 2, .vocab_size = 1000, .tokenizer_hash = 42});
  writer.append(Ids{1, 999, 0, 7});
  writer.append(Ids{5});
  writer.add_text(20, 4);
  const ShardHeader written = writer.commit();
  CHECK(std::filesystem::file_size(path) == kShardHeaderBytes + 5 * 2);
  const TokenShard shard(path, {.tokenizer_hash = 42, .vocab_size = 1000});
  CHECK(shard.header().tokens == 5);
  CHECK(shard.header().text_bytes == 20);
  CHECK(shard.header().words == 4);
  CHECK(shard.header().ids_hash == written.ids_hash);
  const TokenView ids = shard.tokens();
  REQUIRE(ids.size() == 5);
  CHECK(
      (std::vector<std::int64_t>{ids[0], ids[1], ids[2], ids[3], ids[4]} == Ids{1, 999, 0, 7, 5}));
  CHECK(id_bytes_for(65536) == 2);
  CHECK(id_bytes_for(65537) == 4);
}

TEST_CASE("errors/shard: bad shards are refused, naming the file and what differs") {
  TempDir dir;
  const std::string path = dir.file("s.bin");
  ShardWriter writer(path, {.id_bytes = 4, .vocab_size = 100, .tokenizer_hash = 7});
  writer.append(Ids{1, 2, 3, 99});
  writer.commit();
  const std::string good = file_bytes(path);
  const auto open = [&](const std::string& bytes, ShardExpectation expect = {}) {
    write_bytes(path, bytes);
    return error_message([&] { TokenShard shard(path, expect); });
  };
  SECTION("not a shard") {
    CHECK_THAT(open("hello, world: some text, not ids at all, " + good),
               Contains("not a kiln token shard"));
  }
  SECTION("a corrupt header") {
    std::string bad = good;
    bad[20] ^= 1;
    CHECK_THAT(open(bad), Contains(path) && Contains("header is corrupt"));
  }
  SECTION("truncated") { CHECK_THAT(open(good.substr(0, good.size() - 2)), Contains("truncated")); }
  SECTION("too short for a header") {
    CHECK_THAT(open(good.substr(0, 10)), Contains("shorter than the 64-byte header"));
  }
  SECTION("corrupt ids") {
    std::string bad = good;
    bad[kShardHeaderBytes + 1] ^= 1;
    CHECK_THAT(open(bad), Contains("ids are corrupt"));
  }
  SECTION("another tokenizer") {
    CHECK_THAT(open(good, {.tokenizer_hash = 8}), Contains("belongs to another tokenizer"));
  }
  SECTION("ids beyond the vocabulary") {
    // The header says vocabulary 50 (its CRC fixed): id 99 is out of range.
    std::string bad = good;
    const std::uint32_t vocab = 50;
    std::memcpy(bad.data() + 56, &vocab, 4);
    const std::uint32_t crc = crc32(bad.data(), 60);
    std::memcpy(bad.data() + 60, &crc, 4);
    CHECK_THAT(open(bad), Contains("id 99 at token 3 is outside the vocabulary"));
  }
  SECTION("a writer refuses an id beyond the vocabulary") {
    ShardWriter w(dir.file("t.bin"), {.id_bytes = 2, .vocab_size = 10});
    CHECK_THAT(error_message([&] { w.append(Ids{3, 10}); }), Contains("id 10 is outside"));
  }
}

TEST_CASE("errors/shard: a header whose counts lie (its CRC recomputed) is refused") {
  // Found by a probe: a header saying 0 or 1 text bytes gave "valid bpb nan" or 116237.13.
  TempDir dir;
  dir.write("train.txt", "the cat sat on the mat\nthe dog\n");
  dir.write("valid.txt", "a cat\non a mat\n");
  dir.write("test.txt", "the end\n");
  const auto rewrite = [](const std::string& path, std::size_t offset, auto value) {
    std::string bytes = file_bytes(path);
    std::memcpy(bytes.data() + offset, &value, sizeof value);
    const std::uint32_t crc = crc32(bytes.data(), 60);
    std::memcpy(bytes.data() + 60, &crc, 4);
    write_bytes(path, bytes);
  };
  for (const std::string tokenizer : {"char", "bpe", "word"}) {
    CAPTURE(tokenizer);
    const std::string out = dir.file("ds-" + tokenizer);
    prepare_dataset({.inputs = {dir.path().string()},
                     .out = out,
                     .tokenizer = tokenizer,
                     .vocab_size = tokenizer == "bpe" ? 260 : 0});
    const std::string valid = out + "/valid.bin";
    const std::string good = file_bytes(valid);
    const PreparedDataset data(out, nullptr, kAllSplits);
    CHECK(data.tokens("valid").text_bytes == 15);
    CHECK(data.tokens("valid").words == 7);
    const auto refused = [&](std::size_t offset, auto value) {
      rewrite(valid, offset, value);
      const std::string message = error_message([&] { PreparedDataset(out, nullptr, kAllSplits); });
      write_bytes(valid, good);
      return message;
    };
    for (const std::uint64_t text_bytes : {0, 1}) {
      CHECK_THAT(refused(24, text_bytes),
                 Contains(valid) && Contains("text_bytes is " + std::to_string(text_bytes)));
    }
    if (tokenizer != "word") CHECK_THAT(refused(24, std::uint64_t{16}), Contains("text_bytes"));
    CHECK_THAT(refused(32, std::uint64_t{1}), Contains(valid) && Contains("words is 1"));
    CHECK_THAT(refused(32, std::uint64_t{1000}), Contains(valid) && Contains("words is 1000"));
    CHECK_THAT(refused(12, std::uint32_t{4}), Contains(valid) && Contains("ids of 4 bytes"));
    CHECK_THAT(refused(56, std::uint32_t{100000}), Contains(valid) && Contains("vocabulary"));
  }
  // A shard of no tokens (header and file agree) is not a split.
  const std::string out = dir.file("ds-char");
  const std::uint64_t hash = read_tokenizer(out + "/tokenizer.json")->hash();
  ShardWriter empty(out + "/test.bin", {.id_bytes = 2,
                                        .vocab_size = static_cast<std::uint32_t>(
                                            read_tokenizer(out + "/tokenizer.json")->vocab_size()),
                                        .tokenizer_hash = hash});
  empty.commit();
  CHECK_THAT(error_message([&] { PreparedDataset(out, nullptr, kAllSplits); }),
             Contains(out + "/test.bin") && Contains("tokens is 0"));
}

TEST_CASE("errors/inputs: every reader refuses a FIFO or a folder at once, naming it") {
  // Found by a probe: a FIFO given as valid.bin blocked train_lm, eval_ppl and --resume forever
  // in open(2), waiting for a writer.
  TempDir dir;
  dir.write("train.txt", "the cat sat\n");
  dir.write("valid.txt", "a cat\n");
  dir.write("test.txt", "the end\n");
  const std::string out = dir.file("ds");
  prepare_dataset({.inputs = {dir.path().string()}, .out = out, .tokenizer = "char"});
  const std::string fifo = dir.file("fifo"), folder = dir.file("folder");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::filesystem::create_directory(folder);
  const auto readers = [&](const std::string& path) {
    return std::vector<std::pair<std::string, std::function<void()>>>{
        {"open_input_file", [&] { open_input_file(path, "input"); }},
        {"TokenShard", [&] { TokenShard shard(path, {}); }},
        {"read_tokenizer", [&] { read_tokenizer(path); }},
        {"read_text_file", [&] { read_text_file(path); }},
        {"load_safetensors", [&] { load_safetensors(path); }},
        {"PreparedDataset valid.bin", [&] {
           std::filesystem::remove(out + "/valid.bin");
           std::filesystem::create_symlink(path, out + "/valid.bin");
           PreparedDataset(out, nullptr, kAllSplits);
         }}};
  };
  // (A folder is a text input of its own files.)
  auto fifo_readers = readers(fifo);
  fifo_readers.emplace_back("prepare_dataset --train", [&] {
    prepare_dataset({.train = fifo, .valid = fifo, .test = fifo, .out = dir.file("o")});
  });
  for (const std::string& path : {fifo, folder}) {
    for (const auto& [name, read] : path == fifo ? fifo_readers : readers(folder)) {
      CAPTURE(path, name);
      // A reader stuck in open() waits forever: after 3 s a writer opens the FIFO to free it,
      // and the test fails on the flag.
      std::atomic<bool> done = false, rescued = false;
      std::thread watchdog([&] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (!done && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (done || path != fifo) return;
        rescued = true;
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      });
      const std::string message = error_message(read);
      done = true;
      watchdog.join();
      CHECK_FALSE(rescued);
      CHECK_THAT(message,
                 Contains("not a regular file") || Contains("neither a file nor a folder"));
    }
  }
}

TEST_CASE("errors/tokenizer: an id far beyond the tokens is refused, not std::bad_alloc") {
  // Found by a probe and by fuzz_tokenizer_json's seed broken-bpe-large-id: the reader grew its
  // tables to the id first.
  std::string json = file_bytes(kBpeSamples + "hf_tokenizer.json");
  const std::size_t at = json.find("\"!\": 0,");
  REQUIRE(at != std::string::npos);
  json.replace(at, 6, "\"!\": 1000000000");
  CHECK_THAT(error_message([&] { tokenizer_from_json(json, "big.json"); }),
             Contains("big.json") && Contains("has id 1000000000") && Contains("no token has id"));
}

TEST_CASE("the prepare step: three files, BPE, decoded back to the exact text") {
  TempDir dir;
  const std::string out = dir.file("ds");
  const PrepareResult r = prepare_dataset({.train = kBpeSamples + "train.txt",
                                           .valid = kBpeSamples + "sample.txt",
                                           .test = kBpeSamples + "sample.txt",
                                           .out = out,
                                           .vocab_size = 600,
                                           .threads = 2});
  CHECK(r.tokenizer_kind == "bpe");
  CHECK(r.vocab_size == 600);
  // The trained tokenizer is the committed one (the golden tests' kiln_tokenizer.json).
  CHECK(file_bytes(out + "/tokenizer.json") == file_bytes(kBpeSamples + "kiln_tokenizer.json"));
  const PreparedDataset data(out, nullptr, kAllSplits);
  CHECK(all_ids_text(data, "train") == file_bytes(kBpeSamples + "train.txt"));
  CHECK(all_ids_text(data, "valid") == file_bytes(kBpeSamples + "sample.txt"));
  const SplitTokens valid = data.tokens("valid");
  CHECK(valid.text_bytes ==
        static_cast<std::int64_t>(file_bytes(kBpeSamples + "sample.txt").size()));
  // Its word count is the word-level tokens the corpus reader gives the same text.
  Vocabulary vocab;
  CHECK(valid.words ==
        static_cast<std::int64_t>(
            tokenize_text(file_bytes(kBpeSamples + "sample.txt"), "s", vocab).ids.size()));
  CHECK(data.header("train").ids_hash == r.splits[0].header.ids_hash);
  // Another tokenizer is refused.
  const BpeTokenizer other =
      BpeTokenizer::from_json(file_bytes(kBpeSamples + "hf_tokenizer.json"), "hf");
  CHECK_THAT(error_message([&] { PreparedDataset(out, &other, kAllSplits); }),
             Contains("prepared with tokenizer"));
}

TEST_CASE("the prepare step: one folder cut by fractions at line starts, char tokens") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "in" / "sub");
  std::string a, b;
  for (int i = 0; i < 300; ++i) a += "line " + std::to_string(i) + " of the first file, é and 中\n";
  for (int i = 0; i < 100; ++i) b += "second file line " + std::to_string(i) + "\r\n";
  dir.write("in/a.txt", a);
  dir.write("in/sub/b.txt", b);
  dir.write("in/.hidden", std::string("\0\0", 2));  // skipped
  const std::string out = dir.file("ds");
  const PrepareResult r = prepare_dataset({.inputs = {dir.file("in")},
                                           .out = out,
                                           .tokenizer = "char",
                                           .valid_fraction = 0.1,
                                           .test_fraction = 0.1,
                                           .block_bytes = 1000,  // many blocks
                                           .threads = 3});
  REQUIRE(r.splits.size() == 3);
  const PreparedDataset data(out, nullptr, kAllSplits);
  const std::string joined =
      all_ids_text(data, "train") + all_ids_text(data, "valid") + all_ids_text(data, "test");
  CHECK(joined == a + b);
  std::uint64_t bytes = 0;
  for (const PreparedSplit& s : r.splits) bytes += s.header.text_bytes;
  CHECK(bytes == a.size() + b.size());
  // Splits start at line starts, about 80% / 10% / 10% of the bytes.
  const std::string valid = all_ids_text(data, "valid");
  CHECK(valid.rfind("line ", 0) == 0);
  CHECK(std::abs(static_cast<double>(valid.size()) / static_cast<double>(bytes) - 0.1) < 0.02);
  CHECK(data.tokenizer().vocab_size() == 256 + 2);  // é and 中
}

TEST_CASE("a split of several files counts each file's words once") {
  // Found by a probe: WordCounter::finish() returns a running total, which was added once per
  // file, so three files of 432, 2,068 and 1,851 words recorded 7,283.
  TempDir dir;
  const std::vector<std::string> texts = {"one two three\nfour\n", "five six\nseven",
                                          "eight\r\nnine ten eleven\n\ntwelve\n"};
  std::uint64_t expected = 0;
  for (const std::string split : {"train", "valid", "test"}) {
    std::filesystem::create_directories(dir.path() / split);
    for (std::size_t f = 0; f < texts.size(); ++f)
      dir.write(split + "/" + std::to_string(f) + ".txt", texts[f]);
  }
  for (const std::string& text : texts) {
    Vocabulary vocab;
    expected += tokenize_text(text, "t", vocab).ids.size();
  }
  REQUIRE(expected >= 15);
  const std::string out = dir.file("ds");
  const PrepareResult r = prepare_dataset({.train = dir.file("train"),
                                           .valid = dir.file("valid"),
                                           .test = dir.file("test"),
                                           .out = out,
                                           .tokenizer = "char",
                                           .block_bytes = 4});  // several blocks per file
  for (const PreparedSplit& s : r.splits) CHECK(s.header.words == expected);
  CHECK(static_cast<std::uint64_t>(
            PreparedDataset(out, nullptr, kAllSplits).tokens("valid").words) == expected);
}

TEST_CASE("errors/prepare: bad text stops the step before any file is written") {
  TempDir dir;
  const std::string out = dir.file("ds");
  const auto prepare = [&](PrepareOptions o) {
    o.out = out;
    return error_message([&] { prepare_dataset(o); });
  };
  SECTION("an empty corpus") {
    dir.write("empty.txt", "");
    CHECK_THAT(prepare({.inputs = {dir.file("empty.txt")}}), Contains("no text"));
  }
  SECTION("a missing input") {
    CHECK_THAT(prepare({.inputs = {dir.file("nope.txt")}}), Contains("nope.txt: not found"));
  }
  SECTION("a line past the limit") {
    std::string text = "short\n" + std::string(50, 'x') + "\n";
    for (int i = 0; i < 20; ++i) text += "short\n";
    dir.write("long.txt", text);
    const std::string message = prepare({.inputs = {dir.file("long.txt")},
                                         .tokenizer = "char",
                                         .valid_fraction = 0.2,
                                         .test_fraction = 0.2,
                                         .max_line_bytes = 20});
    CHECK_THAT(message, Contains("long.txt:2") && Contains("longer than 20 bytes") &&
                            Contains("--max-line-bytes"));
  }
  SECTION("a NUL byte") {
    dir.write("bin.txt", std::string("text\n\0more\n", 11) + std::string(100, 'a'));
    CHECK_THAT(prepare({.train = dir.file("bin.txt"),
                        .valid = dir.file("bin.txt"),
                        .test = dir.file("bin.txt"),
                        .tokenizer = "char"}),
               Contains("bin.txt:2") && Contains("NUL byte"));
  }
  SECTION("a split without text") {
    dir.write("one.txt", "just one line\n");
    CHECK_THAT(prepare({.inputs = {dir.file("one.txt")}, .tokenizer = "char"}),
               Contains("split has no text"));
  }
  CHECK_FALSE(std::filesystem::exists(out + "/train.bin"));
  CHECK_FALSE(std::filesystem::exists(out + "/tokenizer.json"));
}

TEST_CASE("errors/prepare: an --out whose dataset names are not regular files is refused") {
  // Found by review: only the names were checked, so a folder named train.bin passed and was
  // deleted with the old dataset.
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "text");
  dir.write("text/train.txt", "the cat sat\n");
  dir.write("text/valid.txt", "a cat\n");
  dir.write("text/test.txt", "the end\n");
  const std::string out = dir.file("ds");
  std::filesystem::create_directories(out + "/train.bin");
  dir.write("ds/train.bin/mine.txt", "mine");
  CHECK_THAT(error_message([&] {
               prepare_dataset({.inputs = {dir.file("text")}, .out = out, .tokenizer = "char"});
             }),
             Contains("train.bin (not a regular file)") && Contains("give a folder of its own"));
  CHECK(std::filesystem::exists(out + "/train.bin/mine.txt"));
}

TEST_CASE("a text folder encoded with a tokenizer counts its bytes and words") {
  TempDir dir;
  dir.write("train.txt", "a b c\nd e\n");
  dir.write("valid.txt", "hello there\nsecond line");
  dir.write("test.txt", "x\n");
  const auto bpe = std::make_shared<BpeTokenizer>(
      BpeTokenizer::from_json(file_bytes(kBpeSamples + "hf_tokenizer.json"), "hf"));
  const std::unique_ptr<Dataset> data = open_dataset(dir.path(), bpe, {"valid"}, 1);
  const SplitTokens valid = data->tokens("valid");
  CHECK(valid.text_bytes == 23);
  CHECK(valid.words == 6);  // hello there <eos> second line <eos>
  CHECK(all_ids_text(*data, "valid") == "hello there\nsecond line");
  CHECK_THAT(error_message([&] { data->tokens("train"); }), Contains("not read"));
  // Without a tokenizer: the word-level corpus of the folder's three files.
  const std::unique_ptr<Dataset> words = open_dataset(dir.path(), nullptr, kAllSplits, 1);
  CHECK(words->tokenizer().kind() == "word");
  CHECK(words->tokens("train").words == 7);
  CHECK(words->tokens("train").text_bytes == 10);
}
