// attention_maps: where a trained language model looks. Runs a text through a checkpoint's model
// and writes, for every layer and head, an SVG heat map of the attention probabilities A (rows:
// query tokens, columns: key tokens), plus index.html showing them all side by side, layers as
// rows and heads as columns, so heads that attend to different things stand out.
//
//   build/apps/attention_maps --checkpoint runs/lm.safetensors
//       --text "the cat sat on the mat because it was warm" --out maps/   (one command line)
//   open maps/index.html
//
// The files are hand-written SVG and HTML (apps/common/attention_map.h), with no
// dependencies; any browser shows them.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/attention_map.h"
#include "apps/common/flags.h"
#include "apps/common/program.h"
#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/threads.h"
#include "lm/transformer_checkpoint.h"
#include "lm/words.h"

using namespace kiln;

namespace {

struct Flags {
  std::string checkpoint;
  std::string text;
  std::string out;
  std::string device = "cpu";
  int threads = 0;
};

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(file.is_open(), "--out: cannot create {}", path.string());
  file << content;
  file.close();
  KILN_CHECK(!file.fail(), "--out: writing {} failed (disk full?)", path.string());
}

void run(const Flags& flags) {
  if (flags.threads > 0) set_num_threads(flags.threads);
  const Device device = device_from_flag(flags.device);
  const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint(flags.checkpoint);
  const nn::TransformerConfig& config = ckpt.config;
  const std::unique_ptr<nn::TransformerLM> model = lm::load_model(ckpt, device);

  lm::EncodedText text;
  if (ckpt.tokenizer->kind() == "word") {
    text = lm::encode_words(flags.text, ckpt.vocabulary, "--text");
    lm::warn_unknown_words(text, "attention_maps");
  } else {
    text.ids = ckpt.tokenizer->encode(flags.text);
  }
  const auto T = static_cast<std::int64_t>(text.ids.size());
  KILN_CHECK(T > 0, "--text has no words: no tokens to run");
  KILN_CHECK(T <= config.max_seq_len, "--text has {} tokens but the model's max_seq_len is {}", T,
             config.max_seq_len);
  // Labels are the tokens the model saw: an unknown word shows as <unk>, a BPE token as its text.
  std::vector<std::string> tokens;
  for (std::int64_t id : text.ids) tokens.push_back(ckpt.tokenizer->token_label(id));

  std::vector<Tensor> attention;  // per layer: A (1, h, T, T)
  {
    NoGradGuard no_grad;
    model->forward(from_vector(text.ids, {1, T}, device), nullptr, &attention);
  }

  const std::filesystem::path out = flags.out;
  std::error_code error;
  std::filesystem::create_directories(out, error);
  KILN_CHECK(!error, "--out {}: cannot create the folder: {}", flags.out, error.message());
  for (std::int64_t l = 0; l < config.layers; ++l) {
    const std::vector<float> A = attention[l].to_vector<float>();  // (h, T, T) on the host
    for (std::int64_t h = 0; h < config.heads; ++h) {
      const std::span<const float> head(A.data() + h * T * T, T * T);
      const std::string title = fmt::format("layer {}, head {} (blocks.{}.attn)", l, h, l);
      write_file(out / attention_svg_name(l, h), attention_svg(head, tokens, title));
    }
  }
  const std::string description = fmt::format(
      "Checkpoint {}: {} layers, {} heads of d_head {}, d_model {}, {}-LN, {} positions, "
      "vocabulary of {} tokens.",
      flags.checkpoint, config.layers, config.heads, config.d_head(), config.d_model,
      nn::name_of(config.norm), nn::name_of(config.position), config.vocab);
  write_file(out / "index.html",
             attention_index_html(description, tokens, config.layers, config.heads));
  std::printf("attention_maps: wrote %lld maps and %s\n",
              static_cast<long long>(config.layers * config.heads),
              (out / "index.html").string().c_str());
  KILN_CHECK(std::fflush(stdout) == 0, "writing to stdout failed: {}", std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout is a write error, never death by a signal
  CLI::App app{"attention_maps: SVG heat maps of every attention head of a TransformerLM"};
  Flags flags;
  add_path_flag(app, "--checkpoint", flags.checkpoint, "the model (.safetensors from train_lm)")
      ->required();
  app.add_option("--text", flags.text,
                 "the text to run through the model, at most max_seq_len tokens (a word-level "
                 "model: words separated by spaces, unknown ones become <unk>)")
      ->required();
  add_path_flag(app, "--out", flags.out,
                "folder for layer<l>_head<h>.svg and index.html (created if missing)")
      ->required();
  app.add_option("--device", flags.device, "cpu, cuda or cuda:N")->capture_default_str();
  add_number_flag(app, "--threads", flags.threads, "CPU threads",
                  thread_flag_range("OpenMP's default, every core"));
  CLI11_PARSE(app, argc, argv);

  return run_program("attention_maps", [&] {
    run(flags);
    return 0;
  });
}
