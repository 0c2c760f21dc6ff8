#include "lm/hugging_face.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "core/checked.h"
#include "core/io/output_file.h"
#include "core/io/safetensors.h"
#include "core/io/staging_folder.h"
#include "data/bpe_tokenizer.h"
#include "data/corpus.h"
#include "nn/transformer_layout.h"

namespace kiln::lm {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The one name table: a block's Hugging Face tensor (after "h.<l>.") and kiln's (after
// "blocks.<l>."); conv1d: stored (in, out) by GPT-2's Conv1D, so transposed to kiln's (out, in).
struct NamePair {
  const char* hf;
  const char* kiln;
  bool conv1d;
};
constexpr NamePair kBlockNames[] = {
    {"ln_1.weight", "norm1.weight", false},          {"ln_1.bias", "norm1.bias", false},
    {"attn.c_attn.weight", "attn.qkv.weight", true}, {"attn.c_attn.bias", "attn.qkv.bias", false},
    {"attn.c_proj.weight", "attn.out.weight", true}, {"attn.c_proj.bias", "attn.out.bias", false},
    {"ln_2.weight", "norm2.weight", false},          {"ln_2.bias", "norm2.bias", false},
    {"mlp.c_fc.weight", "ffn.fc1.weight", true},     {"mlp.c_fc.bias", "ffn.fc1.bias", false},
    {"mlp.c_proj.weight", "ffn.fc2.weight", true},   {"mlp.c_proj.bias", "ffn.fc2.bias", false},
};
constexpr NamePair kModelNames[] = {
    {"wte.weight", "embedding.weight", false},
    {"wpe.weight", "position_embedding.weight", false},
    {"ln_f.weight", "norm.weight", false},
    {"ln_f.bias", "norm.bias", false},
};
// The causal-mask buffers older transformers saved in every block: not weights.
constexpr const char* kIgnoredBlockBuffers[] = {"attn.bias", "attn.masked_bias"};
constexpr const char* kPrefix = "transformer.";

struct HfName {
  std::string hf;  // without the "transformer." prefix
  bool conv1d = false;
};

// kiln name -> Hugging Face name, for a config's layout.
std::map<std::string, HfName> hf_names(const nn::TransformerConfig& c) {
  std::map<std::string, HfName> names;
  for (const NamePair& p : kModelNames) names[p.kiln] = {p.hf, p.conv1d};
  for (std::int64_t l = 0; l < c.layers; ++l)
    for (const NamePair& p : kBlockNames)
      names[fmt::format("blocks.{}.{}", l, p.kiln)] = {fmt::format("h.{}.{}", l, p.hf), p.conv1d};
  return names;
}

bool ignored_buffer(std::string_view name) {
  if (!name.starts_with("h.")) return false;
  for (const char* buffer : kIgnoredBlockBuffers) {
    const std::string_view suffix = buffer;
    if (name.size() > suffix.size() + 1 && name.ends_with(suffix) &&
        name[name.size() - suffix.size() - 1] == '.')
      return true;
  }
  return false;
}

// A JSON field's value when present and not null.
const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::int64_t integer_field(const json& j, const char* key, std::string_view source) {
  const json* v = field(j, key);
  KILN_CHECK(v != nullptr && v->is_number_integer() && v->get<std::int64_t>() > 0,
             "{}: '{}' is missing or not a positive integer", source, key);
  return v->get<std::int64_t>();
}

double real_field(const json& j, const char* key, double absent, std::string_view source) {
  const json* v = field(j, key);
  if (v == nullptr) return absent;
  KILN_CHECK(v->is_number(), "{}: '{}' is {}, not a number", source, key, v->dump());
  return v->get<double>();
}

// A boolean field that must have the value kiln implements (absent: transformers' default).
void require_flag(const json& j, const char* key, bool implemented, bool absent,
                  std::string_view source, std::string_view why) {
  const json* v = field(j, key);
  const bool value = v != nullptr && v->is_boolean() ? v->get<bool>() : absent;
  KILN_CHECK(v == nullptr || v->is_boolean(), "{}: '{}' is {}, not a boolean", source, key,
             v->dump());
  KILN_CHECK(value == implemented, "{}: '{}' is {}: {}", source, key, value, why);
}

// A byte-level BPE tokenizer.json made from GPT-2's original vocab.json and merges.txt, with
// "<|endoftext|>" as its added token when the vocabulary has it.
std::string tokenizer_json_from_vocab_merges(const fs::path& dir) {
  const std::string source = (dir / "vocab.json").string();
  json vocab;
  try {
    vocab = json::parse(read_text_file(dir / "vocab.json", "Hugging Face vocab.json"));
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", source, e.what());
  }
  KILN_CHECK(vocab.is_object(), "{}: not a JSON object of token -> id", source);
  json merges = json::array();
  const std::string text = read_text_file(dir / "merges.txt", "Hugging Face merges.txt");
  std::size_t begin = 0;
  bool first = true;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // The first line of GPT-2's file is "#version: 0.2", a comment.
    if (!line.empty() && !(first && line.starts_with("#version"))) merges.push_back(line);
    first = false;
    begin = end + 1;
  }
  json j = {{"version", "1.0"},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  json added = json::array();
  if (const auto it = vocab.find("<|endoftext|>"); it != vocab.end())
    added.push_back({{"id", *it}, {"content", "<|endoftext|>"}, {"special", true}});
  j["added_tokens"] = added;
  return j.dump();
}

std::string read_tokenizer_json(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json"))
    return read_text_file(dir / "tokenizer.json", "Hugging Face tokenizer.json");
  KILN_CHECK(fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"),
             "Hugging Face folder {}: no tokenizer.json, nor vocab.json and merges.txt",
             dir.string());
  return tokenizer_json_from_vocab_merges(dir);
}

void write_text(const fs::path& path, const std::string& text) {
  AtomicFile file(path.string(), "kiln-export");
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace

bool is_hugging_face_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

nn::TransformerConfig config_from_hugging_face(std::string_view text, std::string_view source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", source, e.what());
  }
  KILN_CHECK(j.is_object(), "{}: not a JSON object", source);
  const json* type = field(j, "model_type");
  KILN_CHECK(type != nullptr && type->is_string() && type->get<std::string>() == "gpt2",
             "{}: model_type is {}; kiln reads GPT-2 (\"gpt2\")", source,
             type ? type->dump() : "missing");
  nn::TransformerConfig c;
  c.vocab = integer_field(j, "vocab_size", source);
  c.d_model = integer_field(j, "n_embd", source);
  c.heads = integer_field(j, "n_head", source);
  c.layers = integer_field(j, "n_layer", source);
  c.max_seq_len = integer_field(j, "n_positions", source);
  const json* inner = field(j, "n_inner");
  c.ff = inner == nullptr
             ? checked_mul(4, c.d_model, fmt::format("{}: n_inner (null: 4 x n_embd)", source))
             : integer_field(j, "n_inner", source);
  c.position = nn::PositionKind::learned;
  c.norm = nn::NormPlacement::pre;
  c.embedding_scale = nn::EmbeddingScale::none;

  const json* act = field(j, "activation_function");
  KILN_CHECK(act == nullptr || act->is_string(), "{}: 'activation_function' is {}, not a string",
             source, act->dump());
  const std::string activation = act == nullptr ? "gelu_new" : act->get<std::string>();
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    c.activation = nn::Activation::gelu_tanh;
  } else if (activation == "gelu") {
    c.activation = nn::Activation::gelu;
  } else if (activation == "relu") {
    c.activation = nn::Activation::relu;
  } else {
    fail(
        "{}: activation_function '{}' is not implemented (kiln has gelu_new, "
        "gelu_pytorch_tanh, gelu and relu)",
        source, activation);
  }
  c.dropout = real_field(j, "resid_pdrop", 0.1, source);
  c.attn_dropout = real_field(j, "attn_pdrop", 0.1, source);
  const double embd = real_field(j, "embd_pdrop", 0.1, source);
  KILN_CHECK(embd == c.dropout,
             "{}: embd_pdrop {} differs from resid_pdrop {}; kiln has one dropout for both", source,
             embd, c.dropout);
  const double eps = real_field(j, "layer_norm_epsilon", 1e-5, source);
  KILN_CHECK(eps == 1e-5, "{}: layer_norm_epsilon {} is not kiln's LayerNorm epsilon 1e-05", source,
             eps);
  require_flag(j, "tie_word_embeddings", true, true, source,
               "kiln's output layer is the embedding itself (tied)");
  require_flag(j, "scale_attn_weights", true, true, source,
               "kiln scales attention scores by 1/sqrt(d_head)");
  require_flag(j, "scale_attn_by_inverse_layer_idx", false, false, source,
               "kiln does not scale attention by 1/(layer + 1)");
  require_flag(j, "add_cross_attention", false, false, source,
               "kiln's decoder has no cross-attention");
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
  return c;
}

TransformerCheckpoint read_hugging_face_gpt2(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const std::string where = fmt::format("Hugging Face folder {}", dir_text);
  const nn::TransformerConfig config =
      config_from_hugging_face(read_text_file(dir / "config.json", "Hugging Face config.json"),
                               (dir / "config.json").string());

  const fs::path weights = dir / "model.safetensors";
  if (!fs::exists(weights)) {
    KILN_CHECK(!fs::exists(dir / "pytorch_model.bin"),
               "{}: only pytorch_model.bin, which kiln does not read (a pickle can run code); "
               "convert it once with transformers: AutoModelForCausalLM.from_pretrained(DIR)"
               ".save_pretrained(DIR, safe_serialization=True)",
               where);
    KILN_CHECK(!fs::exists(dir / "model.safetensors.index.json"),
               "{}: sharded weights (model.safetensors.index.json) are not read; save them as one "
               "model.safetensors",
               where);
    fail("{}: no model.safetensors", where);
  }
  SafetensorsFile file = load_safetensors(weights.string());

  // The file's tensors by their name without the prefix.
  std::map<std::string, Tensor> by_name;
  std::optional<Tensor> lm_head;
  for (auto& [full, tensor] : file.tensors) {
    std::string name =
        full.starts_with(kPrefix) ? full.substr(std::string_view(kPrefix).size()) : full;
    if (ignored_buffer(name)) continue;
    if (name == "lm_head.weight") {
      lm_head = tensor;
      continue;
    }
    KILN_CHECK(by_name.emplace(name, tensor).second, "{}: tensor '{}' appears twice", where, name);
  }

  const std::map<std::string, HfName> names = hf_names(config);
  NamedTensors model;
  std::set<std::string> used;
  NoGradGuard no_grad;
  for (const nn::TensorLayout& t : nn::state_layout(config)) {
    const HfName& hf = names.at(t.name);
    const auto it = by_name.find(hf.hf);
    KILN_CHECK(it != by_name.end(), "{}: tensor '{}{}' is missing (kiln's '{}', shape {})", where,
               kPrefix, hf.hf, t.name, t.shape);
    const Tensor& tensor = it->second;
    const Shape expected = hf.conv1d ? Shape{t.shape[1], t.shape[0]} : t.shape;
    KILN_CHECK(tensor.shape() == expected, "{}: tensor '{}{}' has shape {}; config.json needs {}",
               where, kPrefix, hf.hf, tensor.shape(), expected);
    KILN_CHECK(tensor.dtype() == DType::f32 || tensor.dtype() == DType::bf16,
               "{}: tensor '{}{}' is {}; kiln reads F32, F16 and BF16 weights", where, kPrefix,
               hf.hf, tensor.dtype());
    const Tensor f32 = tensor.to(DType::f32);
    model.emplace_back(t.name, hf.conv1d ? f32.t().contiguous() : f32.contiguous());
    used.insert(hf.hf);
  }
  for (const auto& [name, tensor] : by_name)
    KILN_CHECK(used.contains(name), "{}: tensor '{}' is not part of GPT-2 with this config.json",
               where, name);
  if (lm_head) {
    const Tensor& wte = model.front().second;  // embedding.weight comes first
    const Tensor head = lm_head->to(DType::f32).contiguous();
    const bool equal = head.shape() == wte.shape() &&
                       std::memcmp(head.raw_data(), wte.raw_data(), wte.numel() * 4) == 0;
    KILN_CHECK(equal,
               "{}: lm_head.weight differs from transformer.wte.weight; kiln's output layer is "
               "the embedding (tied)",
               where);
  }

  Checkpoint ckpt;
  ckpt.path = dir_text;
  ckpt.model = std::move(model);
  const std::string tokenizer_json = read_tokenizer_json(dir);
  ckpt.tokenizer = std::make_shared<BpeTokenizer>(BpeTokenizer::from_json(tokenizer_json, where));
  ckpt.metadata["format"] = kCheckpointFormat;
  ckpt.metadata["tokenizer"] = ckpt.tokenizer->to_json();
  ckpt.metadata["config"] = config.to_json();
  return transformer_checkpoint_from(std::move(ckpt));
}

void write_hugging_face_gpt2(const TransformerCheckpoint& ckpt, const std::string& dir_text) {
  const nn::TransformerConfig& c = ckpt.config;
  const std::string where = fmt::format("kiln-export --format hf: {}", ckpt.path);
  KILN_CHECK(c.norm == nn::NormPlacement::pre,
             "{}: the model is post-LN; GPT-2 normalises before each sublayer (pre-LN)", where);
  KILN_CHECK(c.position == nn::PositionKind::learned,
             "{}: the model has {} positions; GPT-2 has learned ones (train with --pos learned)",
             where, nn::name_of(c.position));
  KILN_CHECK(c.kv() == c.heads,
             "{}: the model has {} key/value heads for {} heads (GQA/MQA); GPT-2 has one per head",
             where, c.kv(), c.heads);
  KILN_CHECK(c.embedding_scale == nn::EmbeddingScale::none,
             "{}: the model scales its embeddings by sqrt(d_model); GPT-2 does not "
             "(train with --embedding-scale none)",
             where);
  KILN_CHECK(!c.adaptive(),
             "{}: the model's output is an adaptive softmax ({}); GPT-2's is the full softmax "
             "over its tied embedding",
             where, nn::cutoffs_text(c.adaptive_cutoffs));
  KILN_CHECK(ckpt.tokenizer->kind() == "bpe",
             "{}: the model's tokenizer is {}-level; GPT-2's is byte-level BPE (kiln-prepare "
             "--tokenizer bpe)",
             where, ckpt.tokenizer->kind());
  const std::string activation = c.activation == nn::Activation::gelu_tanh ? "gelu_new"
                                 : c.activation == nn::Activation::gelu    ? "gelu"
                                                                           : "relu";
  const auto& bpe = static_cast<const BpeTokenizer&>(*ckpt.tokenizer);
  std::int64_t end_of_text = -1;
  for (const BpeTokenizer::AddedToken& added : bpe.added_tokens())
    if (added.content == "<|endoftext|>") end_of_text = added.id;
  json config = {{"architectures", {"GPT2LMHeadModel"}},
                 {"model_type", "gpt2"},
                 {"vocab_size", c.vocab},
                 {"n_embd", c.d_model},
                 {"n_head", c.heads},
                 {"n_layer", c.layers},
                 {"n_positions", c.max_seq_len},
                 {"n_inner", c.ff},
                 {"activation_function", activation},
                 {"resid_pdrop", c.dropout},
                 {"embd_pdrop", c.dropout},
                 {"attn_pdrop", c.attn_dropout},
                 {"layer_norm_epsilon", 1e-5},
                 {"initializer_range", 0.02},
                 {"scale_attn_weights", true},
                 {"scale_attn_by_inverse_layer_idx", false},
                 {"reorder_and_upcast_attn", false},
                 {"tie_word_embeddings", true},
                 {"use_cache", true},
                 {"torch_dtype", "float32"}};
  // Written as null when the tokenizer has no "<|endoftext|>": absent, transformers' GPT2Config
  // would default both to 50256, GPT-2's id, outside a small vocabulary.
  config["bos_token_id"] = end_of_text >= 0 ? json(end_of_text) : json(nullptr);
  config["eos_token_id"] = config["bos_token_id"];

  const std::map<std::string, HfName> names = hf_names(c);
  NamedTensors tensors;
  NoGradGuard no_grad;
  for (const auto& [name, tensor] : ckpt.model) {
    const HfName& hf = names.at(name);
    tensors.emplace_back(kPrefix + hf.hf, hf.conv1d ? tensor.t().contiguous() : tensor);
  }
  // The three files are written to a folder beside --out and swapped in together: a failed
  // export leaves the old folder whole, never a mix of old and new files.
  constexpr std::string_view kFiles[] = {"config.json", "model.safetensors", "tokenizer.json"};
  StagingFolder staging(folder_to_replace(dir_text, "kiln-export --out", kFiles),
                        "kiln-export --out", "kiln-export");
  const fs::path& dir = staging.path();
  save_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_text(dir / "config.json", config.dump(2) + "\n");
  // kiln's own file, vocabulary in id order (a parsed nlohmann::json would sort it by token).
  write_text(dir / "tokenizer.json", bpe.to_json() + "\n");
  staging.replace();
}

}  // namespace kiln::lm
