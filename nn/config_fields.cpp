#include "nn/config_fields.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::nn {

namespace {

constexpr std::string_view kActivations[] = {"relu", "gelu", "gelu_tanh"};
constexpr std::string_view kPositions[] = {"sinusoidal", "rope", "learned"};
constexpr std::string_view kEmbeddingScales[] = {"sqrt_d", "none"};
constexpr std::string_view kNorms[] = {"post", "pre"};
constexpr std::string_view kInputs[] = {"embedding", "adaptive"};
constexpr FieldRange kProbability{.min = 0, .max = 1, .max_open = true};

using C = TransformerConfig;

const ConfigField kFields[] = {
    {.flag = nullptr, .key = "vocab", .help = "vocabulary size", .integer = &C::vocab},
    {.flag = "--d-model", .key = "d_model", .help = "model width", .integer = &C::d_model},
    {.flag = "--heads",
     .key = "heads",
     .help = "attention heads (must divide --d-model)",
     .integer = &C::heads},
    {.flag = "--kv-heads",
     .key = "kv_heads",
     .help = "key/value heads, GQA/MQA (must divide --heads)",
     .integer = &C::kv_heads,
     .range = {.min = 0, .zero = "as many as --heads"}},
    {.flag = "--layers", .key = "layers", .help = "transformer blocks", .integer = &C::layers},
    {.flag = "--ff", .key = "ff", .help = "feed-forward hidden size", .integer = &C::ff},
    {.flag = "--max-seq-len",
     .key = "max_seq_len",
     .help = "longest sequence the model takes (--seq-len must not exceed it)",
     .integer = &C::max_seq_len},
    {.flag = "--dropout",
     .key = "dropout",
     .help = "dropout after embedding + positions and on each sublayer output",
     .real = &C::dropout,
     .range = kProbability},
    {.flag = "--attn-dropout",
     .key = "attn_dropout",
     .help = "dropout on the attention probabilities",
     .real = &C::attn_dropout,
     .range = kProbability},
    {.flag = "--word-dropout",
     .key = "word_dropout",
     .help = "word (embedding) dropout: the fraction of word types whose embedding a training "
             "step zeroes at every occurrence (AWD-LSTM's)",
     .real = &C::word_dropout,
     .range = kProbability,
     .optional = true},
    {.flag = "--activation",
     .key = "activation",
     .help = "feed-forward activation (gelu: erf form; gelu_tanh: GPT-2's tanh form)",
     .choices = kActivations,
     .get_choice = [](const C& c) -> std::string { return std::string(name_of(c.activation)); },
     .set_choice = [](C& c, std::string_view v) { c.activation = parse_activation(v); }},
    {.flag = "--pos",
     .key = "position",
     .help = "positions: added sinusoids, rotary (RoPE) or a learned table (GPT-2's)",
     .choices = kPositions,
     .get_choice = [](const C& c) -> std::string { return std::string(name_of(c.position)); },
     .set_choice = [](C& c, std::string_view v) { c.position = parse_position(v); }},
    {.flag = "--norm",
     .key = "norm",
     .help = "LayerNorm after (post) or before (pre) each sublayer",
     .choices = kNorms,
     .get_choice = [](const C& c) -> std::string { return std::string(name_of(c.norm)); },
     .set_choice = [](C& c, std::string_view v) { c.norm = parse_norm(v); }},
    {.flag = "--embedding-scale",
     .key = "embedding_scale",
     .help = "factor on the token embeddings: sqrt_d (sqrt(d_model)) or none (GPT-2)",
     .choices = kEmbeddingScales,
     .get_choice = [](const C& c) -> std::string {
       return std::string(name_of(c.embedding_scale));
     },
     .set_choice = [](C& c, std::string_view v) { c.embedding_scale = parse_embedding_scale(v); },
     .optional = true},
    {.flag = "--adaptive-softmax",
     .key = "adaptive_softmax",
     .help = "adaptive softmax cutoffs in frequency ranks, e.g. 2000,10000 (none: the full "
             "softmax; docs/adaptive-softmax.md)",
     .get_choice = [](const C& c) -> std::string {
       return c.adaptive() ? cutoffs_text(c.adaptive_cutoffs) : "none";
     },
     .set_choice = [](C& c, std::string_view v) { c.adaptive_cutoffs = parse_cutoffs(v); },
     .optional = true},
    {.flag = "--adaptive-div",
     .key = "adaptive_div",
     .help = "adaptive softmax: cluster i is d_model / div^(i+1) wide",
     .real = &C::adaptive_div,
     .range = {.min = 1},
     .optional = true},
    {.flag = "--input",
     .key = "input",
     .help = "input layer: the embedding, or adaptive input sharing the adaptive softmax's "
             "clusters (needs --adaptive-softmax)",
     .choices = kInputs,
     .get_choice = [](const C& c) -> std::string { return std::string(name_of(c.input)); },
     .set_choice = [](C& c, std::string_view v) { c.input = parse_input(v); },
     .optional = true},
};

// "positive", "positive (or 0: as many as --heads)", "in [0, 1)": the rule in the messages.
std::string rule_text(const FieldRange& r) {
  if (std::isinf(r.max) && r.min == 1) return "positive";
  if (std::isinf(r.max) && r.min == 0)
    return r.zero ? fmt::format("positive (or 0: {})", r.zero) : "non-negative";
  return fmt::format("in [{}, {}{}", r.min, r.max, r.max_open ? ")" : "]");
}

}  // namespace

std::span<const ConfigField> config_fields() { return kFields; }

std::string ConfigField::text(const TransformerConfig& config) const {
  if (is_choice()) return get_choice(config);
  return integer ? nlohmann::json(config.*integer).dump() : nlohmann::json(config.*real).dump();
}

void ConfigField::check(const TransformerConfig& config) const {
  if (is_choice()) return;  // set_choice accepts only its names
  const double value = integer ? static_cast<double>(config.*integer) : config.*real;
  const bool ok = value >= range.min && (range.max_open ? value < range.max : value <= range.max);
  KILN_CHECK(ok, "config: {} must be {}, got {}", key, rule_text(range), text(config));
}

}  // namespace kiln::nn
