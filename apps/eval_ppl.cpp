// eval_ppl: the perplexity and bits per byte of a checkpoint on the valid or test split.
//
//   build/apps/eval_ppl --checkpoint runs/lm.best.safetensors --split test
//   build/apps/eval_ppl --checkpoint runs/lm.best.safetensors --split valid --stride 16
//
// The headline protocol (bench/torch_ref.py's evaluate, here through lm::evaluate):
// non-overlapping windows of the training T (saved in the checkpoint), batch 10, every target
// token counted. It prints the loss in nats, the tokens scored and the speed, then
//
//   <split> ppl <x>
//
// computed by the same function (apps/common/lm::evaluate) as train_lm's final lines, and, with
// the checkpoint's thread count (the default), equal to them bit for bit. --stride S < T adds a
// separately labelled line, "<split> ppl (stride S) <x>", from sliding windows that score each
// target once with more left context. Before it, "<split> bpb <x> | ..." gives bits per byte
// and the loss and perplexity per token and per word (apps/common/text_data.h), the figures that
// compare models of different tokenizations. --data is a text folder, read with the
// checkpoint's tokenizer (word-level: words it lacks become <unk> and are counted), or a
// prepared dataset, which must have been prepared with the checkpoint's tokenizer.
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/flags.h"
#include "apps/common/options.h"
#include "apps/common/program.h"
#include "apps/common/signals.h"
#include "apps/common/text_data.h"
#include "core/autocast.h"
#include "core/build_info.h"
#include "core/threads.h"
#include "data/corpus.h"
#include "lm/evaluate.h"
#include "lm/train_state.h"
#include "lm/transformer_checkpoint.h"

using namespace kiln;

namespace {

int eval(int argc, char** argv) {
  install_stop_handlers();
  CLI::App app{"eval_ppl: perplexity of a train_lm checkpoint on the valid or test split"};
  std::string checkpoint_path, data, split = "valid", device_text = "cpu", precision;
  std::int64_t batch_size = 10, seq_len = 0, stride = 0;
  int threads = 0;
  add_path_flag(app, "--checkpoint", checkpoint_path,
                "the checkpoint (e.g. runs/lm.best.safetensors)")
      ->required();
  add_path_flag(app, "--data", data,
                "a folder with valid.txt and test.txt, or a prepared dataset (kiln-prepare) "
                "(default: $KILN_DATA, else datasets/wikitext-2)");
  app.add_option("--split", split, "valid or test")
      ->check(CLI::IsMember({"valid", "test"}))
      ->capture_default_str();
  add_number_flag(app, "--batch-size", batch_size, "columns B of the token stream", {.min = 1});
  add_number_flag(app, "--seq-len", seq_len,
                  "window length T, at most the model's max_seq_len (default: the checkpoint's "
                  "training T)",
                  {.min = 1});
  add_number_flag(app, "--stride", stride,
                  "also score sliding windows that advance by S < T rows, each target once with "
                  "more left context (default: T, the headline only)",
                  {.min = 1});
  add_number_flag(app, "--threads", threads, "CPU threads",
                  thread_flag_range("the checkpoint's count, which reproduces train_lm's numbers "
                                    "bit for bit"));
  app.add_option("--device", device_text, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--precision", precision,
                 "the matrix products: f32, or bf16 operands with float32 sums (default: the "
                 "checkpoint's training precision, which reproduces train_lm's numbers)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);

  const std::string dir = resolve_data_dir(data.empty() ? std::nullopt : std::optional(data));
  try {
    check_data_folder(dir);
  } catch (const Error& e) {
    fail("--data {}: {}", dir, e.what());
  }
  const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint(checkpoint_path);
  const auto train_entry = ckpt.metadata.find("train");
  const std::int64_t T = seq_len > 0 ? seq_len
                         : train_entry != ckpt.metadata.end()
                             ? saved_seq_len(train_entry->second, checkpoint_path)
                             : 0;
  KILN_CHECK(T > 0, "--seq-len: {} does not record its training window length; give --seq-len",
             checkpoint_path);
  KILN_CHECK(T <= ckpt.config.max_seq_len, "--seq-len {} exceeds the model's max_seq_len {}", T,
             ckpt.config.max_seq_len);
  if (precision.empty()) precision = checkpoint_precision(ckpt.metadata);
  const std::int64_t S = stride > 0 ? stride : T;
  KILN_CHECK(S <= T, "--stride {}: expected an integer in [1, {}] (the window length)", stride, T);
  const Device device = device_from_flag(device_text);
  set_num_threads(threads > 0                        ? threads
                  : lm::checkpoint_threads(ckpt) > 0 ? lm::checkpoint_threads(ckpt)
                                                     : num_threads());
  release_stop_signals();
  fmt::print("{}\n", environment_summary());

  const auto model = lm::load_model(ckpt, device);
  const auto step = ckpt.metadata.find("step");
  fmt::print("checkpoint {}: step {} | {} parameters | vocab {} | T {} | precision {}\n",
             checkpoint_path, step != ckpt.metadata.end() ? step->second : "?",
             model->num_parameters(), ckpt.tokenizer->vocab_size(), T, precision);
  const std::unique_ptr<Dataset> dataset = load_eval_split(dir, ckpt, split, num_threads());
  const SplitTokens text = dataset->tokens(split);
  if (ckpt.tokenizer->kind() == "word") {
    fmt::print("data {}/{}.txt: {} tokens | {} words not in the vocabulary read as <unk>\n", dir,
               split, text.ids.size(), text.unknown);
    if (text.byte_order_mark)
      fmt::print(
          "note: {}/{}.txt begins with a UTF-8 byte-order mark, skipped (it marks the "
          "encoding, it is not part of the first word)\n",
          dir, split);
    const std::int64_t eos = ckpt.vocabulary.eos();
    std::int64_t lines = 0;
    for (std::int64_t i = 0; i < text.ids.size(); ++i) lines += text.ids[i] == eos;
    if (lines == text.ids.size())
      fmt::print(
          "warning: {}/{}.txt has {} lines but no words: the perplexity scores line ends "
          "only\n",
          dir, split, lines);
  }

  const auto cancelled = [] { return stop_signal() != 0; };
  // Prints "<split> loss<suffix> ..." and "<split> ppl<suffix> <x>"; false if interrupted.
  const auto report = [&](const lm::EvalResult& r, const std::string& suffix) {
    if (!r.complete) {
      fmt::print(stderr, "eval_ppl: interrupted by {}\n", signal_name(stop_signal()));
      return false;
    }
    // A NaN perplexity, or an infinite one from a huge finite loss, with exit 0 would pass for
    // a result.
    KILN_CHECK(lm::has_perplexity(r.loss),
               "{}: the loss{} on {} is {}: the weights give no usable perplexity (a diverged or "
               "corrupt checkpoint?)",
               checkpoint_path, suffix, split, r.loss);
    fmt::print("{} loss{} {:.4f} nats per token | {} tokens scored | {:.0f} tokens/s | {:.1f}s\n",
               split, suffix, r.loss, r.tokens,
               r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0, r.seconds);
    if (suffix.empty()) print_text_measures(split, r.loss, text);
    fmt::print("{} ppl{} {}\n", split, suffix, lm::format_ppl(r.loss));
    return true;
  };
  const lm::EvalOptions options{.batch_size = batch_size,
                                .seq_len = T,
                                .precision = parse_precision(precision),
                                .cancelled = cancelled};
  if (!report(lm::evaluate(*model, text.ids, options), "")) return 1;
  if (S < T) {
    lm::EvalOptions sliding = options;
    sliding.stride = S;
    if (!report(lm::evaluate(*model, text.ids, sliding), fmt::format(" (stride {})", S))) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_program("eval_ppl", [&] { return eval(argc, argv); });
}
