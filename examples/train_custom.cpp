// train_custom: a language model of your own, trained, checkpointed, resumed and evaluated by
// lm::Trainer, with nothing of train_lm's code. The model is a neural bigram: each token's
// embedding goes through a hidden layer, and the next token's logits are that times the
// embedding matrix (tied, as in TransformerLM):
//   h = Dropout(ReLU(E[x] W + b)),   logits = h Eᵀ
// lm::Trainer needs only nn::LanguageModel's loss(); the run's state, the best weights, the
// evaluation protocol and the checkpoint format are the library's.
//
//   build/examples/train_custom --steps 200 --save runs/bigram.safetensors
//   build/examples/train_custom --resume runs/bigram.safetensors --steps 400 --save
//   runs/bigram.safetensors
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/flags.h"
#include "apps/common/program.h"
#include "apps/common/progress.h"
#include "apps/common/train_setup.h"
#include "core/kiln.h"
#include "lm/trainer.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "optim/adam.h"

using namespace kiln;

class NeuralBigram : public nn::LanguageModel {
 public:
  NeuralBigram(std::int64_t vocab, std::int64_t width) {
    embedding = register_module("embedding", std::make_shared<nn::Embedding>(vocab, width));
    hidden = register_module("hidden", std::make_shared<nn::Linear>(width, width));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(0.1, &dropout_generator()));
  }

  Tensor loss(const Tensor& inputs, const Tensor& targets, std::int64_t ignore) const override {
    const Tensor h = dropout->forward(relu(hidden->forward(embedding->forward(inputs))));
    return linear_cross_entropy(h.reshape({-1, h.size(-1)}), embedding->weight,
                                targets.reshape({-1}), ignore);
  }

  std::shared_ptr<nn::Embedding> embedding;
  std::shared_ptr<nn::Linear> hidden;
  std::shared_ptr<nn::Dropout> dropout;
};

int main(int argc, char** argv) {
  return run_program("train_custom", [&] {
    CLI::App app{"train_custom: a neural bigram language model trained by lm::Trainer"};
    std::string data, save, resume;
    std::int64_t steps = 200;
    // The flags follow train_lm's rules (apps/common/flags.h): a bad value is a usage error.
    add_path_flag(app, "--data", data,
                  "corpus folder (default: $KILN_DATA, else datasets/wikitext-2)");
    add_number_flag(app, "--steps", steps, "stop at this global step", {.min = 1});
    add_path_flag(app, "--save", save, "checkpoint path (PATH.best: the best weights)");
    add_path_flag(app, "--resume", resume, "continue the run saved in this checkpoint");
    CLI11_PARSE(app, argc, argv);
    // The files it will write, before it trains.
    if (!save.empty()) check_save_path(save, /*curve=*/false);

    // A resumed run reads the corpus with the checkpoint's vocabulary: every word keeps its id.
    std::optional<lm::Checkpoint> resumed;
    if (!resume.empty()) resumed = lm::read_checkpoint(resume);
    const std::string dir = resolve_data_dir(data.empty() ? std::nullopt : std::optional(data));
    const Corpus corpus = resumed ? Corpus(dir, resumed->vocabulary) : Corpus(dir);
    print_byte_order_marks(corpus, dir);

    manual_seed(1);
    NeuralBigram model(corpus.vocabulary().size(), 64);
    Adam optimizer(model.named_parameters());
    lm::Trainer trainer(model, optimizer, corpus,
                        {.batch_size = 16,
                         .seq_len = 32,
                         .schedule = {.lr = 3e-3},
                         .steps = steps,
                         .log_every = 50,
                         .eval_every = 100,
                         .save = save,
                         .threads = num_threads()});
    ProgressLog progress(isatty(STDOUT_FILENO) == 1, trainer.total_steps(), 0);
    trainer.add_observer(progress);
    if (resumed) trainer.resume(*resumed);
    trainer.train();
    progress.finish();
    const std::optional<lm::FinalResult> result = trainer.finish();
    fmt::print("valid ppl {}\ntest ppl {}\n", lm::format_ppl(result->valid.loss),
               lm::format_ppl(result->test.loss));
    return 0;
  });
}
