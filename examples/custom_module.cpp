// custom_module: how to extend kiln with your own layer, in one file.
//
// It defines a SwiGLU feed-forward sublayer (Shazeer 2020),
//   FFN(X) = (SiLU(X W_gate) ⊙ (X W_up)) W_down,   SiLU(z) = z · sigmoid(z),
// swaps it into a TransformerLM for the built-in ReLU FeedForward, and trains a few hundred
// steps on a synthetic task (predict the next token of counting sequences) to show it learns.
// Run it with no arguments: build/examples/custom_module
//
// A layer is a class derived from nn::Module (here nn::UnaryModule, the interface a
// TransformerBlock calls for its feed-forward sublayer) that registers its parameters and
// submodules by name and composes kiln ops in forward(); autograd derives the backward.
#include <cstdio>
#include <memory>

#include "core/kiln.h"
#include "nn/linear.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"

using namespace kiln;

class SwiGLU : public nn::UnaryModule {
 public:
  SwiGLU(std::int64_t d_model, std::int64_t hidden) {
    gate = register_module("gate", std::make_shared<nn::Linear>(d_model, hidden, false));
    up = register_module("up", std::make_shared<nn::Linear>(d_model, hidden, false));
    down = register_module("down", std::make_shared<nn::Linear>(hidden, d_model, false));
  }

  // X (.., d) -> (.., d)
  Tensor forward(const Tensor& x) const override {
    const Tensor z = gate->forward(x);
    return down->forward(z * sigmoid(z) * up->forward(x));
  }

  std::shared_ptr<nn::Linear> gate, up, down;
};

int main() {
  try {
    manual_seed(7);
    nn::TransformerConfig config;
    config.vocab = 32, config.d_model = 32, config.heads = 4, config.layers = 2;
    config.ff = 64, config.max_seq_len = 16, config.dropout = 0.0;
    // 2/3 of ff keeps the parameter count of a two-matrix FFN with hidden size ff.
    nn::TransformerLM model(config, [](const nn::TransformerConfig& c) {
      return std::make_shared<SwiGLU>(c.d_model, 2 * c.ff / 3);
    });
    std::printf("TransformerLM with SwiGLU: %lld parameters; first block's sublayer:\n",
                static_cast<long long>(model.num_parameters()));
    for (const auto& [name, p] : model.named_parameters())
      if (name.rfind("blocks.0.ffn.", 0) == 0)
        std::printf("  %s %s\n", name.c_str(), fmt::format("{}", p.shape()).c_str());

    // Counting sequences: token t is followed by (t + 1) mod vocab, from random starts.
    const std::int64_t B = 16, T = 16;
    Generator data_gen(1);
    auto batch = [&] {
      std::vector<std::int64_t> inputs(B * T), targets(B * T);
      const std::vector<float> starts = rand({B}, {}, &data_gen).to_vector<float>();
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t token = static_cast<std::int64_t>(starts[b] * 32) + t;
          inputs[b * T + t] = token % 32;
          targets[b * T + t] = (token + 1) % 32;
        }
      return std::pair{from_vector(inputs, {B, T}), from_vector(targets, {B, T})};
    };

    Adam optimizer(model.named_parameters(), {.lr = 3e-3});
    for (int step = 1; step <= 300; ++step) {
      const auto [inputs, targets] = batch();
      optimizer.zero_grad();
      const Tensor loss = model.loss(inputs, targets);
      loss.backward();
      optimizer.step(clip_scale(grad_norm(optimizer.parameters()), 1.0));
      if (step == 1 || step % 50 == 0)
        std::printf("step %3d  loss %.4f\n", step, loss.item<double>());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "custom_module: %s\n", e.what());
    return 1;
  }
  return 0;
}
