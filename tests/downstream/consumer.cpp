// Uses an installed kiln: d/dw sum(relu(x w)) for a known x and w, checked exactly; a
// single-process communicator from distributed/; then the lm toolkit (kiln::lm): a TransformerLM
// through a checkpoint and back, evaluated to the same loss.
#include <cstdio>
#include <filesystem>

#include "core/kiln.h"
#include "distributed/communicator.h"
#include "lm/evaluate.h"
#include "lm/transformer_checkpoint.h"
#include "nn/linear.h"

int main() {
  using namespace kiln;
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector<double>({1, -1, 0.5, 2}, {2, 2}).requires_grad_();
  relu(matmul(x, w)).sum().backward();
  // x w = [[2, 3], [5, 5]]: all positive, so d/dw = x^T 1 = [[4, 4], [6, 6]].
  const std::vector<double> expected{4, 4, 6, 6};
  if (w.grad().to_vector<double>() != expected) {
    std::fprintf(stderr, "consumer: wrong gradient %s\n", w.grad().str().c_str());
    return 1;
  }
  // distributed/ links too (with MPI and NCCL when kiln was built with them); alone: one rank.
  const auto comm = dist::make_communicator();
  comm->allreduce(w.grad());
  if (comm->world_size() != 1 || w.grad().to_vector<double>() != expected) return 1;
  nn::Linear layer(2, 3);
  if (layer.forward(x.to(DType::f32)).shape() != Shape{2, 3}) return 1;

  nn::TransformerConfig config;
  config.vocab = 4, config.d_model = 8, config.heads = 2, config.layers = 1, config.ff = 16;
  nn::TransformerLM model(config);
  const Vocabulary vocabulary({"<eos>", "<unk>", "a", "b"});
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln-consumer.safetensors").string();
  lm::write_checkpoint(path, model, vocabulary, {}, {});
  const auto loaded = lm::load_model(lm::read_transformer_checkpoint(path), Device::cpu());
  std::filesystem::remove(path);
  const std::vector<std::int64_t> tokens{0, 2, 3, 2, 3, 0, 2, 2, 3, 0, 3, 2};
  const lm::EvalOptions eval{.batch_size = 2, .seq_len = 3};
  const double before = lm::evaluate(model, tokens, eval).loss;
  const double after = lm::evaluate(*loaded, tokens, eval).loss;
  if (before != after) {
    std::fprintf(stderr, "consumer: the checkpointed model's loss %g is not %g\n", after, before);
    return 1;
  }
  std::printf("consumer: kiln and kiln::lm work downstream (%s)\n", environment_summary().c_str());
  return 0;
}
