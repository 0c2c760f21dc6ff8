// libFuzzer target for the checkpoint reader. An input is a whole file: parse_safetensors (the
// reader behind load_safetensors) checks it, and when it is accepted, the config and vocabulary
// that a kiln checkpoint carries in its metadata are parsed as read_checkpoint
// (lm/checkpoint.cpp, lm/transformer_checkpoint.cpp) parses them. A kiln::Error is the right answer
// to garbage; a crash, any other exception, a hang, a leak or a sanitizer report is a bug.
//
// A random edit of a file almost always breaks its 8-byte header length, and the reader then stops
// before the JSON. So half of the mutations edit the header text alone and rewrite the length to
// match: the JSON checks get explored, while whole-file mutations keep testing the framing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors.h"
#include "data/vocabulary.h"
#include "nn/config.h"
#include "tests/fuzz/fuzz_check.h"

using kiln::fuzz::require;

// libFuzzer's own mutator, for the custom mutator to apply to a part of the input.
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

std::uint64_t header_length(const std::uint8_t* data) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{data[i]} << (8 * i);
  return n;
}

void set_header_length(std::uint8_t* data, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) data[i] = static_cast<std::uint8_t>(n >> (8 * i));
}

// Parses a metadata entry with `parse`, as read_checkpoint does; rejecting it is fine.
template <typename Parse>
void parse_entry(const kiln::Metadata& metadata, const char* key, Parse parse) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return;
  try {
    parse(it->second);
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t max_size, unsigned int seed) {
  if (seed % 2 == 0 || size < 8 || header_length(data) > size - 8 || header_length(data) == 0) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  // (8-byte length) (header: n bytes) (rest), rebuilt around a mutated header.
  const std::size_t n = header_length(data);
  const std::size_t rest = size - 8 - n;
  std::vector<std::uint8_t> header(max_size - 8 - rest);  // the room the header may grow into
  std::memcpy(header.data(), data + 8, n);
  const std::size_t new_n = LLVMFuzzerMutate(header.data(), n, header.size());
  std::memmove(data + 8 + new_n, data + 8 + n, rest);
  std::memcpy(data + 8, header.data(), new_n);
  set_header_length(data, new_n);
  return 8 + new_n + rest;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kiln::SafetensorsFile file;
  try {
    file = kiln::parse_safetensors(std::as_bytes(std::span(data, size)), "fuzz input");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::uint64_t tensor_bytes = 0;
  for (const auto& [name, tensor] : file.tensors) {
    require(tensor.is_contiguous() || tensor.numel() == 0, "loaded tensors are contiguous");
    tensor_bytes += static_cast<std::uint64_t>(tensor.numel()) * kiln::dtype_size(tensor.dtype());
  }
  require(8 + header_length(data) + tensor_bytes == size,
          "the tensors hold every byte after the header");

  parse_entry(file.metadata, "config", [](const std::string& text) {
    const kiln::nn::TransformerConfig config = kiln::nn::TransformerConfig::from_json(text);
    const std::string json = config.to_json();
    require(kiln::nn::TransformerConfig::from_json(json).to_json() == json,
            "an accepted config survives to_json and from_json");
  });
  parse_entry(file.metadata, "vocab", [](const std::string& text) {
    const kiln::Vocabulary vocabulary = kiln::Vocabulary::from_string(text);
    require(vocabulary.to_string() == text, "an accepted vocabulary is saved as it was read");
  });
  return 0;
}
