// TransformerConfig: the sizes and choices of a TransformerLM. It travels inside checkpoints as a
// JSON string (to_json / from_json), so a checkpoint rebuilds its own model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::nn {

// gelu: x Φ(x) with erf; gelu_tanh: GPT-2's tanh approximation (core/ops/elementwise.h).
enum class Activation { relu, gelu, gelu_tanh };
enum class NormPlacement {
  post,
  pre
};  // post: LayerNorm(X + sublayer(X)); pre: X + sublayer(LayerNorm(X))
// learned: a trained (max_seq_len, d_model) table added to the embeddings, as GPT-2's wpe.
enum class PositionKind { sinusoidal, rope, learned };
// What multiplies the token embeddings: √d_model (kiln's default) or 1 (GPT-2).
enum class EmbeddingScale { sqrt_d, none };
// The input layer: the (vocab, d_model) embedding, or adaptive input (Baevski & Auli 2019), which
// shares the adaptive softmax's clusters (nn/adaptive_softmax.h).
enum class InputKind { embedding, adaptive };

struct TransformerConfig {
  std::int64_t vocab = 0;
  std::int64_t d_model = 256;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 0;  // 0: as many as heads (MHA); 1: MQA; between: GQA
  std::int64_t layers = 2;
  std::int64_t ff = 1024;
  std::int64_t max_seq_len = 512;
  double dropout = 0.1;       // after embedding + positions, on Z and on the FFN output
  double attn_dropout = 0.0;  // on the attention probabilities A
  double word_dropout = 0.0;  // word types whose embedding a training forward drops, every use
  Activation activation = Activation::relu;
  NormPlacement norm = NormPlacement::post;
  PositionKind position = PositionKind::sinusoidal;
  EmbeddingScale embedding_scale = EmbeddingScale::sqrt_d;
  // The output: empty, the full softmax over the tied embedding; else the adaptive softmax's
  // cutoffs c_0 < c_1 < ... < vocab in frequency ranks, cluster i of width d_model / div^(i+1)
  // (nn/adaptive_softmax.h).
  std::vector<std::int64_t> adaptive_cutoffs = {};
  double adaptive_div = 4.0;
  InputKind input = InputKind::embedding;

  std::int64_t d_head() const { return d_model / heads; }
  std::int64_t kv() const { return kv_heads == 0 ? heads : kv_heads; }
  bool adaptive() const { return !adaptive_cutoffs.empty(); }
  // The width d_i of adaptive cluster i: adaptive_cluster_width(d_model, adaptive_div, i).
  std::int64_t adaptive_width(std::size_t cluster) const;

  // A kiln::Error naming the first field that is invalid (sizes, heads dividing d_model,
  // kv_heads dividing heads, even d_head for RoPE, dropout in [0, 1), adaptive cutoffs increasing
  // below vocab with clusters at least 1 wide), or the fields whose
  // product overflows int64 (the parameter count, the positional tables, with three copies of
  // the parameters for training: nn/transformer_layout.h).
  void validate() const;

  std::string to_json() const;
  static TransformerConfig from_json(std::string_view json);  // errors name the bad field
};

// The width d_i of adaptive softmax cluster i: floor(d_model / div^(i+1)), as PyTorch's.
std::int64_t adaptive_cluster_width(std::int64_t d_model, double div, std::size_t cluster);

std::string_view name_of(Activation a);
std::string_view name_of(NormPlacement n);
std::string_view name_of(PositionKind p);
std::string_view name_of(EmbeddingScale s);
std::string_view name_of(InputKind k);
Activation parse_activation(std::string_view text);
NormPlacement parse_norm(std::string_view text);
PositionKind parse_position(std::string_view text);
EmbeddingScale parse_embedding_scale(std::string_view text);
InputKind parse_input(std::string_view text);
// "2000,10000" <-> {2000, 10000} ("" for none); errors name --adaptive-softmax and the text.
std::vector<std::int64_t> parse_cutoffs(std::string_view text);
std::string cutoffs_text(const std::vector<std::int64_t>& cutoffs);

}  // namespace kiln::nn
