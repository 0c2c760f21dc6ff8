// lm/hugging_face.h: GPT-2 folders saved by transformers load with transformers' logits and greedy
// continuations (tools/make_hf_gpt2_golden.py wrote tests/golden/hf_gpt2 once; no Python here),
// and every refusal names its tensor or field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/autocast.h"
#include "core/kiln.h"
#include "data/corpus.h"
#include "lm/decoder.h"
#include "lm/hugging_face.h"
#include "tests/harness/paths.h"

using namespace kiln;
using Catch::Contains;
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
}
