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
#include <string>

#include "core/io/safetensors.h"
#include "core/kiln.h"
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
    std::cerr << "usage: make_seeds OUT_DIR (writes OUT_DIR/safetensors, OUT_DIR/text and "
                 "OUT_DIR/checkpoint-values)\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out / "safetensors");
  std::filesystem::create_directories(out / "text");
  std::filesystem::create_directories(out / "checkpoint-values");
  try {
    write_safetensors_seeds(out / "safetensors");
    write_text_seeds(out / "text");
    write_checkpoint_value_seeds(out / "checkpoint-values");
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
