// kiln-export: a kiln checkpoint in another framework's format. --format hf writes a Hugging Face
// GPT-2 folder (config.json, model.safetensors, tokenizer.json) that
// transformers.AutoModelForCausalLM.from_pretrained loads (lm/hugging_face.h,
// docs/huggingface.md); a model GPT-2 cannot express is refused with the reason.
//
//   build/apps/kiln-export --format hf --checkpoint runs/gpt2.safetensors --out exported/gpt2
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/program.h"
#include "lm/hugging_face.h"
#include "nn/transformer_layout.h"

using namespace kiln;

int main(int argc, char** argv) {
  return run_program("kiln-export", [&] {
    CLI::App app{"kiln-export: writes a kiln checkpoint as a Hugging Face GPT-2 folder"};
    std::string format = "hf", checkpoint, out;
    app.add_option("--format", format, "output format: hf (Hugging Face GPT-2)")
        ->check(CLI::IsMember({"hf"}))
        ->capture_default_str();
    app.add_option("--checkpoint", checkpoint, "the kiln checkpoint (or Hugging Face folder)")
        ->required();
    app.add_option("--out", out, "the folder to write (created if absent)")->required();
    CLI11_PARSE(app, argc, argv);
    const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint(checkpoint);
    lm::write_hugging_face_gpt2(ckpt, out);
    fmt::print("wrote {}: config.json, model.safetensors, tokenizer.json ({} parameters)\n", out,
               nn::parameter_count(ckpt.config));
    return 0;
  });
}
