// lm/hugging_face.h: GPT-2 folders saved by transformers load with transformers' logits and greedy
// continuations (tools/make_hf_gpt2_golden.py wrote tests/golden/hf_gpt2 once; no Python here),
// and every refusal names its tensor or field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/autocast.h"
#include "core/kiln.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/word_tokenizer.h"
#include "lm/decoder.h"
#include "lm/hugging_face.h"
#include "tests/harness/near.h"
#include "tests/harness/paths.h"

using namespace kiln;
using Catch::Contains;
using kiln::testing::compare_exact;
namespace fs = std::filesystem;

namespace {

std::string golden(const std::string& name) {
  return testing::source_path("tests/golden/hf_gpt2/" + name);
}

const Tensor& find(const SafetensorsFile& f, const std::string& name) {
  for (const auto& [n, t] : f.tensors)
    if (n == name) return t;
  FAIL("no tensor " << name);
  throw;
}

// max |a - b| and max |b| over two float32 tensors of one shape.
std::pair<double, double> max_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const Tensor x = a.contiguous(), y = b.contiguous();
  const float* p = static_cast<const float*>(x.raw_data());
  const float* q = static_cast<const float*>(y.raw_data());
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    diff = std::max(diff, std::abs(double(p[i]) - q[i]));
    scale = std::max(scale, std::abs(double(q[i])));
  }
  return {diff, scale};
}

std::vector<std::int64_t> ids_of(const Tensor& t) {
  const auto* p = static_cast<const std::int64_t*>(t.raw_data());
  return {p, p + t.numel()};
}

// A copy of golden case a in a temporary folder, to be damaged by a test.
struct Copy {
  fs::path dir;
  explicit Copy(const std::string& name) {
    dir = fs::temp_directory_path() / ("kiln_hf_" + name + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(golden("a"), dir);
  }
  ~Copy() { fs::remove_all(dir); }
  void edit_config(const std::string& from, const std::string& to) {
    std::string text = read_text_file(dir / "config.json");
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    std::ofstream(dir / "config.json") << text;
  }
  void write_tensors(const NamedTensors& tensors) {
    save_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
  }
};

}  // namespace

TEST_CASE("transformers' GPT-2 checkpoints load with its logits and greedy tokens",
          "[lm][huggingface]") {
  for (const char* name : {"a", "b", "c"}) {
    INFO("case " << name);
    const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint(golden(name));
    CHECK(ckpt.config.position == nn::PositionKind::learned);
    CHECK(ckpt.config.embedding_scale == nn::EmbeddingScale::none);
    CHECK(ckpt.config.activation == nn::Activation::gelu_tanh);
    CHECK(ckpt.config.vocab == 263);
    const auto model = lm::load_model(ckpt, Device::cpu());
    const SafetensorsFile expected = load_safetensors(golden(name) + "/expected.safetensors");
    const Tensor logits = model->forward(find(expected, "input_ids"));
    const auto [diff, scale] = max_difference(logits, find(expected, "logits"));
    INFO("max |dlogit| " << diff << ", max |logit| " << scale);
    CHECK(diff <= 1e-5 * scale);

    // Greedy decoding through the KV cache, up to n_positions tokens.
    const std::vector<std::int64_t> prompt = ids_of(find(expected, "prompt"));
    const std::vector<std::int64_t> greedy = ids_of(find(expected, "greedy"));
    lm::Decoder decoder(*model, lm::DecodeMode::cached);
    Generator rng(1);
    const std::vector<std::int64_t> tokens =
        decoder.generate(prompt, ckpt.config.max_seq_len - static_cast<std::int64_t>(prompt.size()),
                         lm::SamplingOptions{.greedy = true}, rng);
    std::vector<std::int64_t> all = prompt;
    all.insert(all.end(), tokens.begin(), tokens.end());
    CHECK(all == greedy);
    // GPT-2 has no position past n_positions: the model refuses one.
    CHECK_THROWS_WITH(
        model->forward(zeros({1, ckpt.config.max_seq_len + 1}, {.dtype = DType::i64})),
        Contains("exceed max_seq_len"));

    // bf16 autocast (bf16 operands, float32 sums): within 3 % of max |logit|, bf16's 8-bit
    // mantissa through a few layers.
    {
      const Autocast bf16(Precision::bf16);
      const Tensor low = model->forward(find(expected, "input_ids"));
      const auto [d16, s16] = max_difference(low, find(expected, "logits"));
      INFO("bf16 max |dlogit| " << d16);
      CHECK(d16 <= 3e-2 * s16);
    }
  }
}

TEST_CASE("a Hugging Face folder's tokenizer is read from tokenizer.json or vocab + merges",
          "[lm][huggingface]") {
  const lm::TransformerCheckpoint a = lm::read_transformer_checkpoint(golden("a"));
  const lm::TransformerCheckpoint b = lm::read_transformer_checkpoint(golden("b"));
  CHECK(a.tokenizer->hash() == b.tokenizer->hash());
  const std::string text = "The quick brown fox<|endoftext|> jumps";
  CHECK(a.tokenizer->encode(text) == b.tokenizer->encode(text));
  CHECK(a.tokenizer->encode("<|endoftext|>") == std::vector<std::int64_t>{0});
}

TEST_CASE("Hugging Face folders kiln cannot read exactly are refused, naming the field or tensor",
          "[lm][huggingface]") {
  SECTION("architecture fields") {
    const std::pair<const char*, const char*> cases[] = {
        {"\"tie_word_embeddings\": false", "tie_word_embeddings"},
        {"\"scale_attn_by_inverse_layer_idx\": true", "scale_attn_by_inverse_layer_idx"},
        {"\"scale_attn_weights\": false", "scale_attn_weights"},
        {"\"activation_function\": \"silu\"", "activation_function 'silu'"},
        {"\"layer_norm_epsilon\": 1e-06", "layer_norm_epsilon"},
        {"\"model_type\": \"llama\"", "model_type"},
        {"\"add_cross_attention\": true", "add_cross_attention"},
        {"\"embd_pdrop\": 0.1", "embd_pdrop 0.1 differs from resid_pdrop 0"},
        // Fields of the wrong JSON type: each a kiln::Error naming config.json and the field.
        {"\"activation_function\": 3", "config.json: 'activation_function' is 3, not a string"},
        {"\"model_type\": 2", "model_type is 2"},
        {"\"n_head\": \"2\"", "config.json: 'n_head' is missing or not a positive integer"},
        {"\"n_inner\": 6.5", "config.json: 'n_inner' is missing or not a positive integer"},
        {"\"resid_pdrop\": \"0\"", "config.json: 'resid_pdrop' is \"0\", not a number"},
        {"\"tie_word_embeddings\": 1", "config.json: 'tie_word_embeddings' is 1, not a boolean"},
        // 4 x n_embd (n_inner null) would overflow int64 before the config is validated.
        {"\"n_embd\": 4611686018427387904",
         "config.json: n_inner (null: 4 x n_embd) overflows int64 (4 x 4611686018427387904)"},
    };
    for (const auto& [field, message] : cases) {
      INFO(field);
      Copy copy("arch");
      const std::string key = std::string(field).substr(0, std::string(field).find(':'));
      std::string text = read_text_file(copy.dir / "config.json");
      const std::size_t at = text.find(key);
      if (at == std::string::npos) {
        copy.edit_config("{", "{\n  " + std::string(field) + ",");
      } else {
        const std::size_t end = text.find_first_of(",\n", at);
        text.replace(at, end - at, field);
        std::ofstream(copy.dir / "config.json") << text;
      }
      CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()), Contains(message));
    }
  }
  SECTION("missing, extra and misshapen tensors, an untied head") {
    Copy copy("tensors");
    const SafetensorsFile original = load_safetensors((copy.dir / "model.safetensors").string());
    NamedTensors missing, extra = original.tensors, misshapen, untied = original.tensors;
    for (const auto& [name, t] : original.tensors) {
      if (name != "transformer.h.1.mlp.c_fc.bias") missing.emplace_back(name, t);
      misshapen.emplace_back(name,
                             name == "transformer.h.0.attn.c_attn.weight" ? t.t().contiguous() : t);
    }
    extra.emplace_back("transformer.h.0.attn.rotary.weight", zeros({2}));
    untied.emplace_back("lm_head.weight", zeros({263, 16}));
    copy.write_tensors(missing);
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("tensor 'transformer.h.1.mlp.c_fc.bias' is missing"));
    copy.write_tensors(extra);
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("tensor 'h.0.attn.rotary.weight' is not part of GPT-2"));
    copy.write_tensors(misshapen);
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("tensor 'transformer.h.0.attn.c_attn.weight' has shape [48, 16]"));
    copy.write_tensors(untied);
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("lm_head.weight differs"));
  }
  SECTION("pytorch_model.bin alone, no tokenizer") {
    Copy copy("bin");
    fs::rename(copy.dir / "model.safetensors", copy.dir / "pytorch_model.bin");
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("only pytorch_model.bin"));
    fs::rename(copy.dir / "pytorch_model.bin", copy.dir / "model.safetensors");
    fs::remove(copy.dir / "tokenizer.json");
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("no tokenizer.json, nor vocab.json and merges.txt"));
  }
  SECTION("sharded weights") {
    Copy copy("sharded");
    fs::rename(copy.dir / "model.safetensors", copy.dir / "model-00001-of-00001.safetensors");
    std::ofstream(copy.dir / "model.safetensors.index.json")
        << R"({"metadata": {}, "weight_map": {}})";
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("sharded weights (model.safetensors.index.json) are not read"));
  }
  SECTION("a config.json problem is named as such, not as a corpus's") {
    Copy copy("empty");
    std::ofstream(copy.dir / "config.json", std::ios::trunc).flush();
    CHECK_THROWS_WITH(lm::read_transformer_checkpoint(copy.dir.string()),
                      Contains("Hugging Face config.json: '") &&
                          Contains("config.json' is empty") && !Contains("corpus") &&
                          !Contains("paragraph"));
  }
}

namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string export_golden(const std::string& name) {
  return testing::source_path("tests/golden/hf_export/" + name);
}

}  // namespace

TEST_CASE("kiln-export --format hf writes the committed folder that transformers loads",
          "[lm][huggingface]") {
  // tools/check_hf_export.py loaded tests/golden/hf_export/gpt2 in transformers (no missing or
  // unexpected keys) and recorded its logits; exporting the kiln checkpoint again must give the
  // same bytes, and kiln's logits must be transformers'.
  const lm::TransformerCheckpoint ckpt =
      lm::read_transformer_checkpoint(export_golden("kiln_gpt2.safetensors"));
  const fs::path out = fs::temp_directory_path() / ("kiln_hf_export" + std::to_string(::getpid()));
  fs::remove_all(out);
  lm::write_hugging_face_gpt2(ckpt, out.string());
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"}) {
    INFO(file);
    CHECK(read_bytes(out / file) == read_bytes(export_golden("gpt2/") + file));
  }
  fs::remove_all(out);

  const auto model = lm::load_model(ckpt, Device::cpu());
  const SafetensorsFile expected =
      load_safetensors(export_golden("transformers_logits.safetensors"));
  const auto [diff, scale] =
      max_difference(model->forward(find(expected, "input_ids")), find(expected, "logits"));
  INFO("max |dlogit| " << diff << ", max |logit| " << scale);
  CHECK(diff <= 1e-5 * scale);
  const std::vector<std::int64_t> greedy = ids_of(find(expected, "greedy"));
  lm::Decoder decoder(*model, lm::DecodeMode::cached);
  Generator rng(1);
  std::vector<std::int64_t> all(greedy.begin(), greedy.begin() + 3);
  const std::vector<std::int64_t> tokens =
      decoder.generate(all, ckpt.config.max_seq_len - 3, lm::SamplingOptions{.greedy = true}, rng);
  all.insert(all.end(), tokens.begin(), tokens.end());
  CHECK(all == greedy);
  // The ids transformers' PreTrainedTokenizerFast gave for this text with the exported file.
  CHECK(ckpt.tokenizer->encode("The quick brown fox jumps over the lazy dog.") ==
        std::vector<std::int64_t>{52,  72,  69, 221, 81,  85, 73, 67, 75,  221, 66,  82, 79, 87,
                                  78,  257, 79, 88,  221, 74, 85, 77, 80,  83,  258, 86, 69, 82,
                                  221, 262, 69, 221, 76,  65, 90, 89, 221, 68,  79,  71, 14});
  // And the folder reads back as the same model.
  const lm::TransformerCheckpoint back = lm::read_transformer_checkpoint(export_golden("gpt2"));
  CHECK(back.config.to_json() == ckpt.config.to_json());
  for (std::size_t i = 0; i < ckpt.model.size(); ++i)
    CHECK(compare_exact(back.model[i].second, ckpt.model[i].second).ok);
}

TEST_CASE("kiln-export --format hf writes kiln's tokenizer.json and null ids without an end token",
          "[lm][huggingface]") {
  lm::TransformerCheckpoint ckpt =
      lm::read_transformer_checkpoint(export_golden("kiln_gpt2.safetensors"));
  const fs::path out = fs::temp_directory_path() / ("kiln_hf_no_eot" + std::to_string(::getpid()));
  fs::remove_all(out);
  // The vocabulary in id order, as kiln writes it (a parsed nlohmann::json would sort it).
  lm::write_hugging_face_gpt2(ckpt, out.string());
  CHECK(read_bytes(out / "tokenizer.json") == ckpt.tokenizer->to_json() + "\n");

  // The same tokenizer without its added "<|endoftext|>": absent ids would be transformers'
  // default 50256, outside this 263-token vocabulary, so they are written as null.
  nlohmann::ordered_json tokenizer = nlohmann::ordered_json::parse(ckpt.tokenizer->to_json());
  tokenizer["added_tokens"] = nlohmann::ordered_json::array();
  ckpt.tokenizer = std::make_shared<BpeTokenizer>(BpeTokenizer::from_json(tokenizer.dump(), "t"));
  lm::write_hugging_face_gpt2(ckpt, out.string());
  const nlohmann::json config = nlohmann::json::parse(read_bytes(out / "config.json"));
  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    INFO(key);
    REQUIRE(config.contains(key));
    CHECK(config[key].is_null());
  }
  fs::remove_all(out);
}

TEST_CASE("kiln-export --format hf replaces an existing folder whole or leaves it as it was",
          "[lm][huggingface]") {
  // Found by review: the three files were renamed in one by one, so an export that failed at
  // the third left the first two new beside an old one; and a folder that could not be created
  // threw a bare std::filesystem_error.
  const lm::TransformerCheckpoint ckpt =
      lm::read_transformer_checkpoint(export_golden("kiln_gpt2.safetensors"));
  const fs::path out = fs::temp_directory_path() / ("kiln_hf_whole" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out / "tokenizer.json");
  std::ofstream(out / "config.json") << "old";
  std::ofstream(out / "model.safetensors") << "old";
  CHECK_THROWS_WITH(lm::write_hugging_face_gpt2(ckpt, out.string()),
                    Contains("kiln-export --out " + out.string()) &&
                        Contains("tokenizer.json (not a regular file)"));
  CHECK(read_bytes(out / "config.json") == "old");
  CHECK(read_bytes(out / "model.safetensors") == "old");
  fs::remove(out / "tokenizer.json");
  std::ofstream(out / "tokenizer.json") << "old";
  lm::write_hugging_face_gpt2(ckpt, out.string());
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"})
    CHECK(read_bytes(out / file) == read_bytes(export_golden("gpt2/") + file));
  // Under a file, no folder can be made: a kiln::Error naming the flag.
  CHECK_THROWS_WITH(lm::write_hugging_face_gpt2(ckpt, (out / "config.json" / "sub").string()),
                    Contains("kiln-export --out " + (out / "config.json" / "sub").string()));
  fs::remove_all(out);
  CHECK_FALSE(
      fs::exists(out.parent_path() / fmt::format(".{}.kiln-export.lock", out.filename().string())));
}

TEST_CASE("kiln-export --format hf refuses what GPT-2 cannot express, with the reason",
          "[lm][huggingface]") {
  const lm::TransformerCheckpoint ckpt =
      lm::read_transformer_checkpoint(export_golden("kiln_gpt2.safetensors"));
  const fs::path out = fs::temp_directory_path() / ("kiln_hf_refused" + std::to_string(::getpid()));
  const auto refused = [&](const lm::TransformerCheckpoint& c, const std::string& reason) {
    CHECK_THROWS_WITH(lm::write_hugging_face_gpt2(c, out.string()), Contains(reason));
    CHECK_FALSE(fs::exists(out));
  };
  lm::TransformerCheckpoint post = ckpt;
  post.config.norm = nn::NormPlacement::post;
  refused(post, "post-LN");
  for (nn::PositionKind p : {nn::PositionKind::sinusoidal, nn::PositionKind::rope}) {
    lm::TransformerCheckpoint other = ckpt;
    other.config.position = p;
    refused(other, fmt::format("{} positions; GPT-2 has learned ones", nn::name_of(p)));
  }
  lm::TransformerCheckpoint gqa = ckpt;
  gqa.config.kv_heads = 1;
  refused(gqa, "(GQA/MQA)");
  lm::TransformerCheckpoint scaled = ckpt;
  scaled.config.embedding_scale = nn::EmbeddingScale::sqrt_d;
  refused(scaled, "scales its embeddings by sqrt(d_model)");
  lm::TransformerCheckpoint chars = ckpt;
  chars.tokenizer = std::make_shared<CharTokenizer>(std::vector<char32_t>{U'\u00e9'});
  refused(chars, "tokenizer is char-level; GPT-2's is byte-level BPE");
  lm::TransformerCheckpoint words = ckpt;
  words.tokenizer = std::make_shared<WordTokenizer>(Vocabulary({"the", "cat", "<eos>"}));
  refused(words, "tokenizer is word-level; GPT-2's is byte-level BPE");
}
