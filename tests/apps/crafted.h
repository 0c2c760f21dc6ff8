// Crafted checkpoints for the tests of hostile input (issue 22, docs/hostile-input.md): a real
// checkpoint that train_lm wrote, rewritten with one value changed, as a careless or hostile user
// would hand it to the programs. The checksum is recomputed (save_safetensors), so each file gets
// past the structural checks and tests what the programs make of the values: no committed binary
// files, every one made here.
//
//   const std::string base = train_base_checkpoint(dir);
//   const std::string bad = dir.file("bad.safetensors");
//   rewrite_checkpoint(base, bad, [](Metadata& m, NamedTensors&) {
//     set_json_field(m, "config", "d_model", "4611686018427387904");
//   });
#pragma once

#include <functional>
#include <string>

#include "core/io/safetensors.h"
#include "tests/harness/temp_dir.h"

namespace kiln::testing {

// Trains the tiny model of programs.h for 2 steps on a tiny corpus written into dir and saves it
// to dir/base.safetensors (a training checkpoint; with eval_every > 0 also dir/base.best...).
// Returns the path.
std::string train_base_checkpoint(const TempDir& dir, const std::string& extra_flags = "");

// Writes `out`: the checkpoint at `in` with `edit` applied to its metadata and tensors.
void rewrite_checkpoint(const std::string& in, const std::string& out,
                        const std::function<void(Metadata&, NamedTensors&)>& edit);

// Sets `field` of the JSON object in metadata entry `entry` ("config", "train",
// "data_position", ...) to `json_value`, JSON text ("4611686018427387904", "\"lion\"").
void set_json_field(Metadata& metadata, const std::string& entry, const std::string& field,
                    const std::string& json_value);

}  // namespace kiln::testing
