#include "nn/config.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/config_fields.h"
#include "nn/transformer_layout.h"

namespace kiln::nn {

std::string_view name_of(Activation a) {
  switch (a) {
    case Activation::relu:
      return "relu";
    case Activation::gelu:
      return "gelu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}
std::string_view name_of(NormPlacement n) { return n == NormPlacement::post ? "post" : "pre"; }
std::string_view name_of(PositionKind p) {
  switch (p) {
    case PositionKind::sinusoidal:
      return "sinusoidal";
    case PositionKind::rope:
      return "rope";
    case PositionKind::learned:
      return "learned";
  }
  return "?";
}
std::string_view name_of(EmbeddingScale s) {
  return s == EmbeddingScale::sqrt_d ? "sqrt_d" : "none";
}

std::string_view name_of(InputKind k) {
  return k == InputKind::embedding ? "embedding" : "adaptive";
}

Activation parse_activation(std::string_view text) {
  if (text == "relu") return Activation::relu;
  if (text == "gelu") return Activation::gelu;
  if (text == "gelu_tanh") return Activation::gelu_tanh;
  fail("activation: '{}' is not relu, gelu or gelu_tanh", text);
}

NormPlacement parse_norm(std::string_view text) {
  if (text == "post") return NormPlacement::post;
  if (text == "pre") return NormPlacement::pre;
  fail("norm: '{}' is not post or pre", text);
}

PositionKind parse_position(std::string_view text) {
  if (text == "sinusoidal") return PositionKind::sinusoidal;
  if (text == "rope") return PositionKind::rope;
  if (text == "learned") return PositionKind::learned;
  fail("pos: '{}' is not sinusoidal, rope or learned", text);
}

EmbeddingScale parse_embedding_scale(std::string_view text) {
  if (text == "sqrt_d") return EmbeddingScale::sqrt_d;
  if (text == "none") return EmbeddingScale::none;
  fail("embedding-scale: '{}' is not sqrt_d or none", text);
}

InputKind parse_input(std::string_view text) {
  if (text == "embedding") return InputKind::embedding;
  if (text == "adaptive") return InputKind::adaptive;
  fail("input: '{}' is not embedding or adaptive", text);
}

std::vector<std::int64_t> parse_cutoffs(std::string_view text) {
  std::vector<std::int64_t> cutoffs;
  if (text.empty() || text == "none") return cutoffs;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    std::int64_t value = 0;
    const auto [last, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    KILN_CHECK(!item.empty() && error == std::errc() && last == item.data() + item.size(),
               "adaptive-softmax: '{}' is not a comma-separated list of integers such as "
               "2000,10000",
               text);
    cutoffs.push_back(value);
    start = end + 1;
  }
  return cutoffs;
}

std::string cutoffs_text(const std::vector<std::int64_t>& cutoffs) {
  return fmt::format("{}", fmt::join(cutoffs, ","));
}

std::int64_t adaptive_cluster_width(std::int64_t d_model, double div, std::size_t cluster) {
  return static_cast<std::int64_t>(
      std::floor(static_cast<double>(d_model) / std::pow(div, static_cast<double>(cluster + 1))));
}

std::int64_t TransformerConfig::adaptive_width(std::size_t cluster) const {
  return adaptive_cluster_width(d_model, adaptive_div, cluster);
}

void TransformerConfig::validate() const {
  for (const ConfigField& field : config_fields()) field.check(*this);
  KILN_CHECK(d_model % heads == 0, "config: heads ({}) must divide d_model ({})", heads, d_model);
  KILN_CHECK(heads % kv() == 0, "config: kv_heads ({}) must divide heads ({})", kv(), heads);
  KILN_CHECK(position != PositionKind::rope || d_head() % 2 == 0,
             "config: RoPE needs an even d_head, got {} (d_model {} / heads {})", d_head(), d_model,
             heads);
  for (std::size_t i = 0; i < adaptive_cutoffs.size(); ++i) {
    const std::int64_t previous = i == 0 ? 0 : adaptive_cutoffs[i - 1];
    KILN_CHECK(adaptive_cutoffs[i] > previous && adaptive_cutoffs[i] < vocab,
               "config: adaptive_softmax cutoffs {} must increase from above 0 to below vocab {}",
               cutoffs_text(adaptive_cutoffs), vocab);
    KILN_CHECK(adaptive_width(i) >= 1,
               "config: adaptive cluster {} would be {} wide (d_model {} / adaptive_div {}^{}); "
               "use fewer cutoffs or a smaller adaptive_div",
               i, adaptive_width(i), d_model, adaptive_div, i + 1);
  }
  KILN_CHECK(input == InputKind::embedding || adaptive(),
             "config: input adaptive needs the adaptive softmax (adaptive_softmax cutoffs)");
  // Every size the model derives from these must fit int64: then the modules' own arithmetic
  // cannot overflow.
  try {
    model_bytes(*this, 3);
  } catch (const Error& e) {
    fail("{} (vocab {}, d_model {}, heads {}, kv_heads {}, layers {}, ff {}, max_seq_len {})",
         e.what(), vocab, d_model, heads, kv(), layers, ff, max_seq_len);
  }
}

std::string TransformerConfig::to_json() const {
  TransformerConfig resolved = *this;
  resolved.kv_heads = kv();  // the file names the count, whatever the default's spelling
  nlohmann::json j = nlohmann::json::object();
  const TransformerConfig defaults;
  for (const ConfigField& field : config_fields()) {
    if (field.optional && field.text(resolved) == field.text(defaults)) continue;
    if (field.is_choice()) {
      j[field.key] = field.get_choice(resolved);
    } else if (field.integer) {
      j[field.key] = resolved.*field.integer;
    } else {
      j[field.key] = resolved.*field.real;
    }
  }
  return j.dump();
}

TransformerConfig TransformerConfig::from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e400
    fail("config: not valid JSON ({}): {}", e.what(), text.substr(0, 200));
  }
  KILN_CHECK(j.is_object(), "config: not a JSON object: {}", text.substr(0, 200));
  TransformerConfig c;
  for (const ConfigField& field : config_fields()) {
    const char* key = field.key;
    const auto it = j.find(key);
    if (field.optional && it == j.end()) continue;  // a file older than the field: the default
    if (field.is_choice()) {
      KILN_CHECK(it != j.end() && it->is_string(), "config: '{}' is missing or not a string", key);
      field.set_choice(c, it->get<std::string>());
    } else if (field.integer) {
      KILN_CHECK(it != j.end() && it->is_number_integer(),
                 "config: '{}' is missing or not an integer", key);
      // nlohmann would wrap an unsigned value beyond int64 to a negative one.
      KILN_CHECK(!it->is_number_unsigned() ||
                     it->get<std::uint64_t>() <=
                         static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                 "config: '{}' is {}, beyond int64", key, it->dump());
      c.*field.integer = it->get<std::int64_t>();
    } else {
      KILN_CHECK(it != j.end() && it->is_number(), "config: '{}' is missing or not a number", key);
      c.*field.real = it->get<double>();
    }
  }
  c.validate();
  return c;
}

}  // namespace kiln::nn
