// Model FLOPs utilisation as llm.c reports it: the training FLOPs a step needs, per token
//
//   6·N + 6·L·T·d     (N parameters, L layers, T the sequence length, d the model width)
//
// (forward 2·N and backward 4·N for the products with the weights, and attention's QKᵀ and AV at
// full T·T), times tokens/s, over the dense bf16 tensor-core peak of the GPU the run is on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::bench {

inline double llmc_flops_per_token(std::int64_t parameters, std::int64_t layers,
                                   std::int64_t seq_len, std::int64_t d_model) {
  return 6.0 * static_cast<double>(parameters) + 6.0 * static_cast<double>(layers) *
                                                     static_cast<double>(seq_len) *
                                                     static_cast<double>(d_model);
}

// The dense (no sparsity) bf16 peak in TFLOP/s of a GPU known by its driver name, from NVIDIA's
// data sheets: H100 SXM 989, H100 PCIe 756, H200 989. nullopt for any other GPU (its MFU is
// printed as n/a, with the name).
inline std::optional<double> bf16_peak_tflops(const std::string& gpu_name) {
  const auto has = [&](const char* part) { return gpu_name.find(part) != std::string::npos; };
  if (has("H200") && !has("NVL")) return 989.0;
  if (has("H100") && has("PCIe")) return 756.0;
  if (has("H100") && (has("HBM3") || has("SXM"))) return 989.0;
  return std::nullopt;
}

}  // namespace kiln::bench
