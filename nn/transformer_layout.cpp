#include "nn/transformer_layout.h"

#include "core/checked.h"

namespace kiln::nn {

namespace {

constexpr std::int64_t kTensorsPerBlock = 12;

// Rows of the fused QKV projection: (heads + 2·kv_heads)·d_head.
std::int64_t qkv_rows(const TransformerConfig& c) {
  const std::int64_t heads = checked_add(c.heads, checked_mul(2, c.kv(), "config: 2 x kv_heads"),
                                         "config: heads + 2 x kv_heads");
  return checked_mul(heads, c.d_head(), "config: (heads + 2 x kv_heads) x d_head");
}

// The state of one block, in registration order (nn/transformer_block.cpp).
std::vector<TensorLayout> block_layout(const TransformerConfig& c, const std::string& prefix) {
  const std::int64_t d = c.d_model, qkv = qkv_rows(c);
  return {{prefix + "attn.qkv.weight", {qkv, d}}, {prefix + "attn.qkv.bias", {qkv}},
          {prefix + "attn.out.weight", {d, d}},   {prefix + "attn.out.bias", {d}},
          {prefix + "norm1.weight", {d}},         {prefix + "norm1.bias", {d}},
          {prefix + "ffn.fc1.weight", {c.ff, d}}, {prefix + "ffn.fc1.bias", {c.ff}},
          {prefix + "ffn.fc2.weight", {d, c.ff}}, {prefix + "ffn.fc2.bias", {d}},
          {prefix + "norm2.weight", {d}},         {prefix + "norm2.bias", {d}}};
}

// The adaptive softmax's parameters (nn/adaptive_softmax.cpp), without its order buffer.
std::vector<TensorLayout> adaptive_layout(const TransformerConfig& c) {
  std::vector<TensorLayout> layout;
  if (!c.adaptive()) return layout;
  const std::int64_t clusters = static_cast<std::int64_t>(c.adaptive_cutoffs.size());
  if (c.input == InputKind::adaptive)
    layout.push_back({"adaptive.shortlist", {c.adaptive_cutoffs[0], c.d_model}});
  layout.push_back({"adaptive.cluster_logits", {clusters, c.d_model}});
  for (std::size_t i = 0; i < c.adaptive_cutoffs.size(); ++i) {
    const std::string prefix = "adaptive.clusters." + std::to_string(i) + ".";
    const std::int64_t end =
        i + 1 < c.adaptive_cutoffs.size() ? c.adaptive_cutoffs[i + 1] : c.vocab;
    const std::int64_t width = c.adaptive_width(i);
    layout.push_back({prefix + "projection", {width, c.d_model}});
    layout.push_back({prefix + "output", {end - c.adaptive_cutoffs[i], width}});
  }
  return layout;
}

std::int64_t elements(const std::vector<TensorLayout>& layout, const char* what) {
  std::int64_t n = 0;
  for (const TensorLayout& t : layout) n = checked_add(n, checked_product(t.shape, what), what);
  return n;
}

bool has_embedding(const TransformerConfig& c) { return c.input == InputKind::embedding; }

}  // namespace

std::int64_t state_tensor_count(const TransformerConfig& c) {
  const std::int64_t blocks =
      checked_mul(c.layers, kTensorsPerBlock, "config: layers x the tensors of a block");
  const std::int64_t adaptive =
      c.adaptive() ? 2 + 2 * static_cast<std::int64_t>(c.adaptive_cutoffs.size()) : 0;
  const std::int64_t input = c.adaptive() && !has_embedding(c) ? 1 : 0;  // the shortlist
  const std::int64_t others = (has_embedding(c) ? 1 : 0) + (c.norm == NormPlacement::pre ? 2 : 0) +
                              (c.position == PositionKind::learned ? 1 : 0) + adaptive + input;
  return checked_add(blocks, others, "config: the tensor count");
}

std::vector<TensorLayout> state_layout(const TransformerConfig& c) {
  std::vector<TensorLayout> layout;
  if (has_embedding(c)) layout.push_back({"embedding.weight", {c.vocab, c.d_model}});
  if (c.position == PositionKind::learned)
    layout.push_back({"position_embedding.weight", {c.max_seq_len, c.d_model}});
  for (std::int64_t l = 0; l < c.layers; ++l) {
    std::vector<TensorLayout> block = block_layout(c, "blocks." + std::to_string(l) + ".");
    layout.insert(layout.end(), block.begin(), block.end());
  }
  if (c.norm == NormPlacement::pre) {
    layout.push_back({"norm.weight", {c.d_model}});
    layout.push_back({"norm.bias", {c.d_model}});
  }
  const std::vector<TensorLayout> adaptive = adaptive_layout(c);
  layout.insert(layout.end(), adaptive.begin(), adaptive.end());
  if (c.adaptive()) layout.push_back({"adaptive.order", {c.vocab}, DType::i64});
  return layout;
}

std::int64_t parameter_count(const TransformerConfig& c) {
  const std::int64_t embedding =
      has_embedding(c) ? checked_mul(c.vocab, c.d_model, "config: vocab x d_model") : 0;
  const std::int64_t adaptive =
      elements(adaptive_layout(c), "config: the parameters of the adaptive softmax");
  const std::int64_t block = elements(block_layout(c, ""), "config: the parameters of a block");
  const std::int64_t blocks =
      checked_mul(c.layers, block, "config: layers x the parameters of a block");
  const std::int64_t final_norm =
      c.norm == NormPlacement::pre ? checked_mul(2, c.d_model, "config: 2 x d_model") : 0;
  const std::int64_t learned_positions =
      c.position == PositionKind::learned
          ? checked_mul(c.max_seq_len, c.d_model, "config: max_seq_len x d_model")
          : 0;
  std::int64_t total = 0;
  for (const std::int64_t part : {embedding, blocks, final_norm, learned_positions, adaptive})
    total = checked_add(total, part, "config: the parameter count");
  return total;
}

std::int64_t position_table_count(const TransformerConfig& c) {
  if (c.position == PositionKind::learned) return 0;  // a parameter, counted there
  if (c.position == PositionKind::sinusoidal)
    return checked_mul(c.max_seq_len, c.d_model, "config: max_seq_len x d_model");
  // cos and sin, each (max_seq_len, d_head / 2): max_seq_len × d_head together.
  return checked_mul(c.max_seq_len, c.d_head(), "config: max_seq_len x d_head");
}

std::int64_t model_bytes(const TransformerConfig& c, std::int64_t copies_per_parameter) {
  const std::int64_t parameters =
      checked_mul(parameter_count(c), checked_add(copies_per_parameter, 1, "model_bytes: copies"),
                  "config: the parameters and their copies");
  // The adaptive softmax's order and its inverse: 8 bytes each per word, 4 floats together.
  const std::int64_t orders = c.adaptive() ? checked_mul(c.vocab, 4, "config: 4 x vocab") : 0;
  const std::int64_t floats =
      checked_add(checked_add(parameters, position_table_count(c), "config: the model's elements"),
                  orders, "config: the model's elements");
  return checked_mul(floats, 4, "config: the model's bytes");
}

}  // namespace kiln::nn
