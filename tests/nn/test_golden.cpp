// kiln's TransformerLM against PyTorch (llm.c's method): tools/make_golden.py ran torch_ref.py's
// model once at a tiny size and saved its weights, a batch, the logits, the loss and every
// gradient in tests/golden/tiny_lm.safetensors. kiln loads the same weights by its documented
// names and must reproduce them in float32.
#include <catch2/catch.hpp>

#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "tests/harness/near.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::nn;

namespace {

struct Golden {
  SafetensorsFile file;
  Tensor get(const std::string& name) const {
    for (const auto& [n, t] : file.tensors)
      if (n == name) return t;
    FAIL("golden file has no tensor " << name);
    return {};
  }
};

Golden load_golden() {
  return Golden{load_safetensors(testing::source_path("tests/golden/tiny_lm.safetensors"))};
}

// The model of the golden file with PyTorch's initial weights loaded.
std::unique_ptr<TransformerLM> golden_model(const Golden& golden) {
  auto model = std::make_unique<TransformerLM>(
      TransformerConfig::from_json(golden.file.metadata.at("config")));
  NamedTensors weights;
  for (const auto& [name, t] : model->named_parameters())
    weights.emplace_back(name, golden.get(name));
  model->load_state_dict(weights);
  return model;
}

}  // namespace

TEST_CASE("TransformerLM reproduces PyTorch's logits, loss and every gradient", "[nn][golden]") {
  const Golden golden = load_golden();
  const auto model = golden_model(golden);
  const Tensor inputs = golden.get("batch.inputs"), targets = golden.get("batch.targets");
  const Tensor logits = model->forward(inputs);
  REQUIRE_NEAR(logits, golden.get("out.logits"), 1e-5, 1e-6);
  const Tensor loss = cross_entropy(logits.view({-1, model->config().vocab}), targets.view({-1}));
  REQUIRE_NEAR(loss, golden.get("out.loss"), 1e-5, 0);
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE_NEAR(p.grad(), golden.get("grad." + name), 1e-4, 1e-6);
  }
}

TEST_CASE("five Adam steps with clipping reproduce PyTorch's losses", "[nn][golden][optim]") {
  const Golden golden = load_golden();
  const auto model = golden_model(golden);
  const Tensor inputs = golden.get("batch.inputs"), targets = golden.get("batch.targets");
  const std::vector<double> expected = golden.get("adam.losses").to_vector<double>();
  // tools/make_golden.py: Adam(lr 1e-2, betas (0.9, 0.999), eps 1e-8), global clip 1.0.
  Adam optimizer(model->named_parameters(),
                 {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
  for (std::size_t step = 0; step < expected.size(); ++step) {
    optimizer.zero_grad();
    const Tensor loss = model->loss(inputs, targets);
    loss.backward();
    optimizer.step(clip_scale(grad_norm(optimizer.parameters()), 1.0));
    INFO("step " << step);
    REQUIRE(testing::near(loss.item<double>(), expected[step], 1e-5, 0));
  }
}
