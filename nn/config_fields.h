// The fields of TransformerConfig in one table: for each, the command-line flag that sets it,
// its key in a checkpoint's config JSON, its help text and its rule; the default is
// TransformerConfig{}'s. TransformerConfig's JSON (to_json, from_json), its per-field checks
// (validate) and the programs' model flags (apps/common/options.cpp) are all generated from
// this table, so a new field is added in one place.
//
//   for (const nn::ConfigField& field : nn::config_fields())
//     fmt::print("{} ({}): {}\n", field.flag, field.key, field.help);
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "nn/config.h"

namespace kiln::nn {

// The values a numeric field accepts: [min, max], or [min, max) with max_open, and what 0 means
// when it is accepted (nullptr: nothing to say).
struct FieldRange {
  double min = 1;
  double max = std::numeric_limits<double>::infinity();
  bool max_open = false;
  const char* zero = nullptr;
};

struct ConfigField {
  const char* flag;  // "--d-model"; nullptr for vocab, which comes from the corpus
  const char* key;   // "d_model"
  const char* help;
  // The member: an integer, a real, or a text: a choice among names, or any text set_choice
  // accepts when choices is empty (exactly one kind is set).
  std::int64_t TransformerConfig::*integer = nullptr;
  double TransformerConfig::*real = nullptr;
  std::span<const std::string_view> choices = {};
  std::string (*get_choice)(const TransformerConfig&) = nullptr;
  void (*set_choice)(TransformerConfig&, std::string_view) = nullptr;  // errors name the field
  FieldRange range = {};                                               // numbers only
  // A field added after checkpoints were written without it: absent from a config's JSON, it
  // takes its default, and to_json leaves it out while it has the default (so the files of
  // models that do not use it stay byte for byte as before).
  bool optional = false;

  bool is_choice() const { return get_choice != nullptr; }
  // The value as JSON text ("256", "0.1", "\"relu\"") and as the flag shows it ("256", "relu").
  std::string text(const TransformerConfig& config) const;
  // A kiln::Error "config: <key> must be <rule>, got <value>" when the value is out of range.
  void check(const TransformerConfig& config) const;
};

// Every field, in the order of --help and of the JSON.
std::span<const ConfigField> config_fields();

}  // namespace kiln::nn
