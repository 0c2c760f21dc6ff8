#include "nn/config.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/transformer_layout.h"

namespace kiln::nn {

std::string_view name_of(Activation a) { return a == Activation::relu ? "relu" : "gelu"; }
std::string_view name_of(NormPlacement n) { return n == NormPlacement::post ? "post" : "pre"; }
std::string_view name_of(PositionKind p) {
  return p == PositionKind::sinusoidal ? "sinusoidal" : "rope";
}

Activation parse_activation(std::string_view text) {
  if (text == "relu") return Activation::relu;
  if (text == "gelu") return Activation::gelu;
  fail("activation: '{}' is not relu or gelu", text);
}

NormPlacement parse_norm(std::string_view text) {
  if (text == "post") return NormPlacement::post;
  if (text == "pre") return NormPlacement::pre;
  fail("norm: '{}' is not post or pre", text);
}

PositionKind parse_position(std::string_view text) {
  if (text == "sinusoidal") return PositionKind::sinusoidal;
  if (text == "rope") return PositionKind::rope;
  fail("pos: '{}' is not sinusoidal or rope", text);
}

void TransformerConfig::validate() const {
  KILN_CHECK(vocab > 0, "config: vocab must be positive, got {}", vocab);
  KILN_CHECK(d_model > 0, "config: d_model must be positive, got {}", d_model);
  KILN_CHECK(heads > 0, "config: heads must be positive, got {}", heads);
  KILN_CHECK(d_model % heads == 0, "config: heads ({}) must divide d_model ({})", heads, d_model);
  KILN_CHECK(kv_heads >= 0, "config: kv_heads must be positive (or 0 for heads), got {}", kv_heads);
  KILN_CHECK(heads % kv() == 0, "config: kv_heads ({}) must divide heads ({})", kv(), heads);
  KILN_CHECK(layers > 0, "config: layers must be positive, got {}", layers);
  KILN_CHECK(ff > 0, "config: ff must be positive, got {}", ff);
  KILN_CHECK(max_seq_len > 0, "config: max_seq_len must be positive, got {}", max_seq_len);
  KILN_CHECK(dropout >= 0 && dropout < 1, "config: dropout must be in [0, 1), got {}", dropout);
  KILN_CHECK(attn_dropout >= 0 && attn_dropout < 1,
             "config: attn_dropout must be in [0, 1), got {}", attn_dropout);
  KILN_CHECK(position != PositionKind::rope || d_head() % 2 == 0,
             "config: RoPE needs an even d_head, got {} (d_model {} / heads {})", d_head(), d_model,
             heads);
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
  const nlohmann::json j = {
      {"vocab", vocab},
      {"d_model", d_model},
      {"heads", heads},
      {"kv_heads", kv()},
      {"layers", layers},
      {"ff", ff},
      {"max_seq_len", max_seq_len},
      {"dropout", dropout},
      {"attn_dropout", attn_dropout},
      {"activation", name_of(activation)},
      {"norm", name_of(norm)},
      {"position", name_of(position)},
  };
  return j.dump();
}

TransformerConfig TransformerConfig::from_json(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  KILN_CHECK(j.is_object(), "config: not a JSON object: {}", text.substr(0, 200));
  TransformerConfig c;
  auto integer = [&](const char* key) {
    KILN_CHECK(j.contains(key) && j[key].is_number_integer(),
               "config: '{}' is missing or not an integer", key);
    // nlohmann would wrap an unsigned value beyond int64 to a negative one.
    KILN_CHECK(!j[key].is_number_unsigned() ||
                   j[key].get<std::uint64_t>() <=
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
               "config: '{}' is {}, beyond int64", key, j[key].dump());
    return j[key].get<std::int64_t>();
  };
  auto number = [&](const char* key) {
    KILN_CHECK(j.contains(key) && j[key].is_number(), "config: '{}' is missing or not a number",
               key);
    return j[key].get<double>();
  };
  auto text_of = [&](const char* key) {
    KILN_CHECK(j.contains(key) && j[key].is_string(), "config: '{}' is missing or not a string",
               key);
    return j[key].get<std::string>();
  };
  c.vocab = integer("vocab");
  c.d_model = integer("d_model");
  c.heads = integer("heads");
  c.kv_heads = integer("kv_heads");
  c.layers = integer("layers");
  c.ff = integer("ff");
  c.max_seq_len = integer("max_seq_len");
  c.dropout = number("dropout");
  c.attn_dropout = number("attn_dropout");
  c.activation = parse_activation(text_of("activation"));
  c.norm = parse_norm(text_of("norm"));
  c.position = parse_position(text_of("position"));
  c.validate();
  return c;
}

}  // namespace kiln::nn
