// Writes the seed corpora of the fuzz targets: make_seeds tests/fuzz/corpus. Seeds are small
// (under 2 KB) so that mutations stay cheap, and they cover what the readers must handle: kiln
// files as save_safetensors writes them (plain tensors and a checkpoint with config and vocabulary
// metadata), a file from another writer, broken files (one problem each), and texts with every
// kind of line ending, space, invalid byte and saved vocabulary the corpus reader distinguishes.
// The output is committed; rerun this only to change the seeds. The edits that seed
// fuzz_checkpoint_values are written too.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "data/char_tokenizer.h"
#include "data/prepare.h"
#include "data/token_shard.h"
#include "nn/config.h"
#include "tests/core/io/files.h"

using namespace kiln;
using kiln::testing::Bytes;
using kiln::testing::raw_safetensors;

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void write_safetensors_seeds(const std::filesystem::path& dir) {
  const auto file = [&](const char* name) { return (dir / name).string(); };
  const NamedTensors small = {{"w", arange(0.0, 6.0, 1.0).reshape({2, 3})}, {"b", full({3}, -0.5)}};
  save_safetensors(file("tensors-f32"), small, {{"format", "kiln-1"}});
  save_safetensors(file("tensors-mixed"),
                   {{"scale", full({}, 2.5)},
                    {"empty", full({0, 4}, 1.0)},
                    {"ids", arange(3, {.dtype = DType::i64})},
                    {"f64", full({1, 2, 1}, 1e-300, {.dtype = DType::f64})}});
  save_safetensors(file("tensors-bf16"),
                   {{"w", arange(0.0, 6.0, 1.0).reshape({2, 3})},
                    {"h", from_vector<bf16>({bf16{0x3eab}, bf16{0x7fc1}, bf16{0x8001}}, {3})}});

  nn::TransformerConfig config;
  config.vocab = 6, config.d_model = 4, config.heads = 2, config.layers = 1, config.ff = 8;
  config.max_seq_len = 8;
  const Metadata checkpoint = {{"format", "kiln-1"},
                               {"config", config.to_json()},
                               {"vocab", "the\ncat\nsat\n<eos>\n<unk>\n="},
                               {"step", "3"},
                               {"decay_steps", "10"},
                               {"threads", "2"},
                               {"data_position", "12"},
                               {"rng", "1234:0"},
                               {"git", "0123456789ab"}};
  const NamedTensors state = {{"embedding.weight", full({6, 4}, 0.25)},
                              {"blocks.0.ln1.bias", full({4}, 0.0)},
                              {"optim.embedding.weight.exp_avg", full({6, 4}, 1e-3)}};
  save_safetensors(file("checkpoint-tiny"), state, checkpoint);
  Metadata bad_metadata = checkpoint;
  bad_metadata["config"] = R"({"vocab":6,"d_model":4,"heads":3})";
  bad_metadata["vocab"] = "the\n\ncat";
  save_safetensors(file("checkpoint-bad-metadata"), state, bad_metadata);

  // Another writer: no metadata, keys in name order rather than data order.
  kiln::testing::write_file(
      file("foreign-no-checksum"),
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                      R"("b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})",
                      16));
  // Broken files, one problem each.
  const Bytes good = kiln::testing::read_file(file("tensors-f32"));
  kiln::testing::write_file(file("broken-truncated"), Bytes(good.begin(), good.end() - 3));
  Bytes flipped = good;
  flipped.back() ^= 0x01;
  kiln::testing::write_file(file("broken-checksum"), flipped);
  Bytes long_header = good;
  long_header[1] = 0x7F;
  kiln::testing::write_file(file("broken-header-length"), long_header);
  kiln::testing::write_file(
      file("broken-overlap"),
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F64","shape":[1],"data_offsets":[4,12]}})",
                      12));
  kiln::testing::write_file(
      file("broken-dtype-shape"),
      raw_safetensors(R"({"__metadata__":{"checksum":"0000000g"},)"
                      R"("a":{"dtype":"F16","shape":[[2]],"data_offsets":[0,4]}})",
                      4));
  kiln::testing::write_file(
      file("broken-bf16-length"),
      raw_safetensors(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8));
}

void write_text_seeds(const std::filesystem::path& dir) {
  write_text(dir / "paragraphs",
             " = Kiln Chronicles = \n \n The kiln was fired in 1879 , and its <unk> lasted for "
             "@-@ three days . \n \n = = History = = \n \n It cost £ 2 @,@ 500 ( about € 3 ) .\n");
  write_text(dir / "line-endings", "a b\r\nc\rd\n\n e\tf\vg\fh\x1ci\x1dj\x1ek\x1fl\r\n\rlast");
  write_text(dir / "unicode-spaces",
             "a\u00a0b\u0085c\u1680d\u2000e\u200af\u2028g\u2029h\u202fi\u205fj\u3000k\n"
             "not spaces: \u00a1 \u200b \u2060 caf\u00e9 \u6226\u5834\n");
  write_text(dir / "invalid-utf8", "ok\n\xff bad\n\xc0\xaf\xed\xa0\x80\n");
  write_text(dir / "nul-byte", std::string("a\0b\n", 4));
  write_text(dir / "saved-vocabulary", "the\ncat\n<eos>\n<unk>\n=");
  write_text(dir / "saved-vocabulary-duplicate", "a\nb\na");
  write_text(dir / "empty-lines", "\n\n\r\n\r");
}

// fuzz_token_shard: shards of its fixed tokenizer (char, with é and 中), each followed by the
// byte that picks the repairs (1: CRC, 2: ids' hash, 4: tokenizer hash).
void write_token_shard_seeds(const std::filesystem::path& dir) {
  const CharTokenizer tokenizer({U'\u00e9', U'\u4e2d'});
  const auto shard = [&](const char* name, std::string_view text, std::uint64_t text_bytes,
                         std::uint64_t words, std::uint32_t id_bytes, char repairs) {
    const std::string path = (dir / name).string();
    ShardWriter writer(path, {.id_bytes = id_bytes,
                              .vocab_size = static_cast<std::uint32_t>(tokenizer.vocab_size()),
                              .tokenizer_hash = tokenizer.hash()});
    writer.append(tokenizer.encode(text));
    writer.add_text(text_bytes, words);
    writer.commit();
    std::ofstream(path, std::ios::binary | std::ios::app) << repairs;
  };
  const std::string text = "caf\u00e9 \u4e2d\nab\r\n";
  shard("valid", text, text.size(), 5, 2, 0);
  shard("valid-4-byte-ids", text, text.size(), 5, 4, 0);
  shard("lying-text-bytes", text, 1, 5, 2, 7);
  shard("lying-words", text, text.size(), 1000, 2, 7);
  shard("no-tokens", "", 0, 0, 2, 7);
  std::ifstream in(dir / "valid", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_text(dir / "truncated", bytes.substr(0, bytes.size() - 4) + '\x07');
  bytes[kShardHeaderBytes] = '\x7f';  // id 32,639 of 258, every repair
  bytes[kShardHeaderBytes + 1] = '\x7f';
  bytes.back() = '\x07';
  write_text(dir / "id-beyond-vocabulary", bytes);
}

// fuzz_tokenizer_json: tokenizers kiln-prepare trains on a small text (BPE, char, word), and
// files with one problem each.
void write_tokenizer_json_seeds(const std::filesystem::path& dir) {
  const std::filesystem::path work = std::filesystem::temp_directory_path() / "kiln-make-seeds";
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  write_text(work / "text.txt",
             "The kiln was fired in 1879 , and the caf\u00e9 's \u4e2d\u6587 lasted .\n"
             "It's   hot\r\n\tIt cost 2,500 (about 3) .\n");
  std::map<std::string, std::string> trained;
  for (const char* kind : {"bpe", "char", "word"}) {
    const std::string out = (work / kind).string();
    prepare_dataset({.train = (work / "text.txt").string(),
                     .valid = (work / "text.txt").string(),
                     .test = (work / "text.txt").string(),
                     .out = out,
                     .tokenizer = kind,
                     .vocab_size = std::string_view(kind) == "bpe" ? 280 : 0});
    std::ifstream in(out + "/tokenizer.json", std::ios::binary);
    trained[kind] = {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    write_text(dir / kind, trained[kind]);
  }
  std::filesystem::remove_all(work);
  // One problem each, in an otherwise valid file.
  const auto edited = [&](const char* name, const std::string& kind, const std::string& from,
                          const std::string& to) {
    std::string json = trained.at(kind);
    const std::size_t at = json.find(from);
    if (at == std::string::npos) fail("make_seeds: {} not found in the {} tokenizer", from, kind);
    write_text(dir / name, json.replace(at, from.size(), to));
  };
  edited("broken-bpe-merge", "bpe", R"("I t")", R"("I q")");
  edited("broken-bpe-large-id", "bpe", R"("!":0)", R"("!":1000000000)");
  edited("broken-bpe-prefix", "bpe", R"("continuing_subword_prefix":null)",
         R"("continuing_subword_prefix":"##")");
  edited("broken-char-code-point", "char", "25991", "1114112");
  edited("broken-word-duplicate", "word", R"("kiln")", R"("The")");
}

}  // namespace

// fuzz_checkpoint_values reads an input as edits of 10 bytes (field, kind, 8-byte payload): the
// empty input (the valid checkpoint as it is) and one edit of each of its fields, each with
// another kind of value, payload 3.
void write_checkpoint_value_seeds(const std::filesystem::path& dir) {
  write_text(dir / "unchanged", "");
  for (int field = 0; field < 42; ++field) {
    std::string record(10, '\0');
    record[0] = static_cast<char>(field);
    record[1] = static_cast<char>((field * 7) % 52);
    record[2] = 3;
    write_text(dir / fmt::format("edit-{:02}", field), record);
  }
  // Edits that only hurt together: a config whose sizes agree with each other but not with the
  // tensors, and a training state edited in several places.
  const auto records = [](std::initializer_list<std::pair<int, int>> edits) {
    std::string bytes;
    for (const auto& [field, kind] : edits) {
      std::string record(10, '\0');
      record[0] = static_cast<char>(field), record[1] = static_cast<char>(kind), record[2] = 5;
      bytes += record;
    }
    return bytes;
  };
  write_text(dir / "config-together", records({{1, 7}, {2, 5}, {6, 9}, {3, 5}}));
  write_text(dir / "state-together", records({{15, 8}, {16, 6}, {17, 7}, {12, 4}, {26, 3}}));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds OUT_DIR (writes OUT_DIR/safetensors, OUT_DIR/text, "
                 "OUT_DIR/checkpoint-values, OUT_DIR/token-shard and OUT_DIR/tokenizer-json)\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out / "safetensors");
  std::filesystem::create_directories(out / "text");
  std::filesystem::create_directories(out / "checkpoint-values");
  std::filesystem::create_directories(out / "token-shard");
  std::filesystem::create_directories(out / "tokenizer-json");
  try {
    write_safetensors_seeds(out / "safetensors");
    write_text_seeds(out / "text");
    write_checkpoint_value_seeds(out / "checkpoint-values");
    write_token_shard_seeds(out / "token-shard");
    write_tokenizer_json_seeds(out / "tokenizer-json");
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
