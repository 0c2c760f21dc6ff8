// generate: text from a trained language model. Loads a checkpoint (its config and tokenizer
// travel inside it), encodes the prompt and samples --tokens more with the KV cache, one
// position of attention per new token, printing each token as it is picked. stdout carries the
// generated text only; warnings and timing go to stderr. A word-level model prints words
// separated by spaces ("<eos>" as a newline); a char or BPE model prints exactly the bytes its
// tokens decode to, nothing added.
//
//   build/apps/generate --checkpoint runs/lm.safetensors --prompt "the meaning of"
//       --tokens 50 --temperature 0.8 --top-p 0.95 --seed 1      (one command line)
//
// A model with learned absolute positions (GPT-2's wpe) has no position past max_seq_len, so the
// sequence (prompt and new tokens) stops there rather than sliding a window whose positions
// restart mid-text. Models whose positions extend (sinusoidal, rotary) keep sampling with a window
// of the last max_seq_len tokens.
//
// The same seed gives the same text on every machine (kiln's Philox generator, see
// lm/sampling.h). --bench also times the uncached path, which re-runs the whole
// context for every token, and reports both speeds.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/flags.h"
#include "apps/common/options.h"
#include "apps/common/program.h"
#include "core/autocast.h"
#include "core/threads.h"
#include "lm/decoder.h"
#include "lm/transformer_checkpoint.h"
#include "lm/words.h"

using namespace kiln;

namespace {

struct Flags {
  std::string checkpoint;
  std::string prompt;
  std::int64_t tokens = 0;
  lm::SamplingOptions sampling;
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision;  // "": the checkpoint's training precision
  int threads = 0;
  bool no_cache = false;
  bool bench = false;
};

void note(const std::string& message) { std::fprintf(stderr, "generate: %s\n", message.c_str()); }

// Prints words separated by spaces, "<eos>" as a newline, flushing after each word so the text
// appears as it is generated. A failed write (a closed pipe) is an error, not a signal.
class WordPrinter {
 public:
  explicit WordPrinter(const Vocabulary& vocab) : vocab_(vocab) {}

  void print(std::int64_t token) {
    const std::string& word = vocab_.word(token);
    if (word == Vocabulary::kEos) {
      write("\n");
      line_empty_ = true;
    } else {
      write(line_empty_ ? word : " " + word);
      line_empty_ = false;
    }
  }
  // Ends an unfinished line.
  void finish() {
    if (!line_empty_) write("\n");
  }

 private:
  static void write(const std::string& text) {
    KILN_CHECK(std::fputs(text.c_str(), stdout) != EOF && std::fflush(stdout) == 0,
               "writing the text to stdout failed: {}", std::strerror(errno));
  }

  const Vocabulary& vocab_;
  bool line_empty_ = true;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Times generating n tokens from the prompt in one mode, with the generator seeded afresh.
std::pair<std::vector<std::int64_t>, double> timed_generation(
    const nn::TransformerLM& model, lm::DecodeMode mode, const std::vector<std::int64_t>& prompt,
    std::int64_t n, const Flags& flags) {
  lm::Decoder decoder(model, mode);
  kiln::Generator gen(flags.seed);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::int64_t> tokens = decoder.generate(prompt, n, flags.sampling, gen);
  return {std::move(tokens), seconds_since(start)};
}

void run(const Flags& flags, bool sampling_flags_given) {
  lm::validate(flags.sampling);
  if (flags.threads > 0) set_num_threads(flags.threads);
  if (flags.sampling.greedy && sampling_flags_given)
    note("warning: --greedy ignores --temperature, --top-k and --top-p");

  const Device device = device_from_flag(flags.device);
  const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint(flags.checkpoint);
  const std::unique_ptr<nn::TransformerLM> model = lm::load_model(ckpt, device);
  const Vocabulary& vocab = ckpt.vocabulary;
  const std::int64_t max_len = ckpt.config.max_seq_len;
  const std::string precision =
      flags.precision.empty() ? checkpoint_precision(ckpt.metadata) : flags.precision;
  // Every forward pass of the generation runs on this thread, under this precision.
  const Autocast mixed(parse_precision(precision));

  const bool words = ckpt.tokenizer->kind() == "word";
  std::vector<std::int64_t> prompt;
  if (words) {
    const lm::EncodedText text = lm::encode_words(flags.prompt, vocab, "--prompt");
    lm::warn_unknown_words(text, "generate");
    prompt = text.ids;
    if (prompt.empty()) {
      // A text starts a line, and every line of the training text followed an <eos>.
      KILN_CHECK(vocab.contains(Vocabulary::kEos),
                 "--prompt is empty and the vocabulary has no {} to start a line from",
                 Vocabulary::kEos);
      prompt.push_back(vocab.eos());
    }
  } else {
    // An empty prompt starts a line: the tokens of "\n".
    prompt = ckpt.tokenizer->encode(flags.prompt.empty() ? "\n" : flags.prompt);
  }
  if (static_cast<std::int64_t>(prompt.size()) > max_len)
    note(fmt::format("warning: the prompt has {} tokens; keeping the last {} (max_seq_len)",
                     prompt.size(), max_len));
  // Learned positions end at max_seq_len: only the tokens that fit beside the prompt's kept ones.
  const std::int64_t kept =
      std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), max_len);
  const bool positions_end = ckpt.config.position == nn::PositionKind::learned;
  const std::int64_t count = positions_end ? std::min(flags.tokens, max_len - kept) : flags.tokens;

  const lm::DecodeMode mode = flags.no_cache ? lm::DecodeMode::uncached : lm::DecodeMode::cached;
  lm::Decoder decoder(*model, mode);
  kiln::Generator gen(flags.seed);
  WordPrinter printer(vocab);
  const auto print_token = [&](std::int64_t token) {
    if (words) return printer.print(token);
    const std::string bytes = ckpt.tokenizer->decode(std::span<const std::int64_t>(&token, 1));
    KILN_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size() &&
                   std::fflush(stdout) == 0,
               "writing the text to stdout failed: {}", std::strerror(errno));
  };
  const std::int64_t prompt_dropped =
      std::max<std::int64_t>(0, static_cast<std::int64_t>(prompt.size()) - max_len);
  bool window_noted = false;
  const auto start = std::chrono::steady_clock::now();
  decoder.generate(prompt, count, flags.sampling, gen, [&](std::int64_t token) {
    print_token(token);
    if (!window_noted && decoder.dropped() > prompt_dropped) {
      window_noted = true;
      note(
          fmt::format("the context reached max_seq_len {}: it keeps the last {} tokens, "
                      "rebuilding the KV cache from them for each new token",
                      max_len, max_len));
    }
  });
  if (words) printer.finish();
  if (count < flags.tokens)
    note(
        fmt::format("stopped after {} of {} tokens: with the {}-token prompt they fill the "
                    "model's {} learned positions (max_seq_len, GPT-2's n_positions), which do "
                    "not extend past it",
                    count, flags.tokens, kept, max_len));
  if (count == 0) return;
  const double elapsed = seconds_since(start);
  note(fmt::format("{} tokens in {:.3f} s ({:.1f} tokens/s, {}) after a {}-token prompt, on {}",
                   count, elapsed, count / elapsed, flags.no_cache ? "no cache" : "KV cache",
                   prompt.size(), flags.device));

  if (flags.bench) {
    const auto [cached, cached_s] =
        timed_generation(*model, lm::DecodeMode::cached, prompt, count, flags);
    const auto [uncached, uncached_s] =
        timed_generation(*model, lm::DecodeMode::uncached, prompt, count, flags);
    note(
        fmt::format("bench: {} tokens after a {}-token prompt: KV cache {:.1f} tokens/s, "
                    "no cache {:.1f} tokens/s ({:.1f}x); same tokens: {}",
                    count, prompt.size(), count / cached_s, count / uncached_s,
                    uncached_s / cached_s, cached == uncached ? "yes" : "NO"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Without this, a closed stdout (generate ... | head) would kill the program with SIGPIPE;
  // ignored, the write fails and the program exits 1 with a message.
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"generate: sample text from a trained TransformerLM checkpoint"};
  Flags flags;
  add_path_flag(app, "--checkpoint", flags.checkpoint, "the model (.safetensors from train_lm)")
      ->required();
  app.add_option("--prompt", flags.prompt,
                 "the text to continue (a word-level model: words separated by spaces, unknown "
                 "ones become <unk>); an empty prompt starts a new line")
      ->required();
  add_number_flag(app, "--tokens", flags.tokens,
                  "how many tokens to generate (a model with learned positions stops when the "
                  "sequence fills max_seq_len)",
                  {.min = 0})
      ->required();
  add_number_flag(app, "--temperature", flags.sampling.temperature,
                  "divides the logits: below 1 sharpens the distribution, above 1 flattens it "
                  "(--greedy ignores it)",
                  {.min = 0, .min_open = true});
  add_number_flag(app, "--top-k", flags.sampling.top_k,
                  "sample among the k most probable tokens only",
                  {.min = 0, .zero = "every token"});
  add_number_flag(app, "--top-p", flags.sampling.top_p,
                  "sample among the smallest set of most probable tokens whose probability "
                  "reaches p (1: all)",
                  {.min = 0, .max = 1, .min_open = true});
  add_number_flag(app, "--seed", flags.seed,
                  "seed of the sampling generator (same seed, same text)", {.min = 0});
  app.add_flag("--greedy", flags.sampling.greedy,
               "always pick the most probable token (no sampling)");
  app.add_option("--device", flags.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--precision", flags.precision,
                 "the matrix products: f32, or bf16 operands with float32 sums (default: the "
                 "checkpoint's training precision)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_number_flag(app, "--threads", flags.threads, "CPU threads",
                  thread_flag_range("OpenMP's default, every core"));
  app.add_flag("--no-cache", flags.no_cache,
               "re-run the whole context for every token instead of using the KV cache");
  app.add_flag("--bench", flags.bench,
               "also time generation with and without the KV cache and report both on stderr");
  CLI11_PARSE(app, argc, argv);

  return run_program("generate", [&] {
    run(flags, app.count("--temperature") + app.count("--top-k") + app.count("--top-p") > 0);
    return 0;
  });
}
