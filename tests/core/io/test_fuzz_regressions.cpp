// Inputs the fuzz targets (tests/fuzz) or their review found to break a reader, each now a
// kiln::Error, plus parse_safetensors, the in-memory reader the checkpoint fuzz target calls.
// Each case names the input, what went wrong before the fix, and the message that replaced it.
#include <catch2/catch.hpp>

#include <cstddef>
#include <span>
#include <string>

#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "tests/core/io/files.h"

using namespace kiln;
using kiln::testing::Bytes;
using kiln::testing::raw_safetensors;
using kiln::testing::ScratchDir;

namespace {

SafetensorsFile parse(const Bytes& bytes) {
  return parse_safetensors(std::as_bytes(std::span(bytes)), "input");
}

}  // namespace

TEST_CASE("parse_safetensors reads what load_safetensors reads, with the same checks",
          "[io][safetensors][fuzz]") {
  ScratchDir dir;
  const std::string path = dir.file("a.safetensors");
  save_safetensors(path, {{"w", full({2, 3}, 1.5)}, {"ids", full({2}, 7.0, {.dtype = DType::i64})}},
                   {{"format", "kiln-1"}});
  const Bytes bytes = kiln::testing::read_file(path);
  const SafetensorsFile from_file = load_safetensors(path);
  const SafetensorsFile from_memory = parse(bytes);
  REQUIRE(from_memory.metadata == from_file.metadata);
  REQUIRE(from_memory.tensors.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(from_memory.tensors[i].first == from_file.tensors[i].first);
    REQUIRE(from_memory.tensors[i].second.to(DType::f64).to_vector<double>() ==
            from_file.tensors[i].second.to(DType::f64).to_vector<double>());
  }
  REQUIRE_THROWS_WITH(
      parse(Bytes(bytes.begin(), bytes.end() - 1)),
      Catch::Contains("parse_safetensors: 'input'") && Catch::Contains("truncated"));
  REQUIRE_THROWS_WITH(parse(Bytes{}), Catch::Contains("shorter than the 8-byte header length"));
}

// Found by fuzz_safetensors: nlohmann throws out_of_range, not parse_error, for a number beyond
// double's range, and the reader let it escape as a foreign exception (a program catching
// kiln::Error ended in std::terminate).
TEST_CASE("a header number beyond double's range is an error naming the file",
          "[io][safetensors][fuzz]") {
  const Bytes bytes =
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,1e400]}})", 4);
  REQUIRE_THROWS_WITH(parse(bytes), Catch::Contains("parse_safetensors: 'input'") &&
                                        Catch::Contains("not valid JSON") &&
                                        Catch::Contains("number overflow"));
}

// Found while writing fuzz_safetensors, confirmed through it (ASan: stack-overflow): error
// messages show bad values with json::dump, which recurses once per level, so a dtype nested
// 200,000 arrays deep overflowed the stack. Headers deeper than 128 levels (the reference
// reader's limit too) are now refused while parsing.
TEST_CASE("a header nested deeper than 128 levels is an error, not a stack overflow",
          "[io][safetensors][fuzz]") {
  const auto nested_dtype = [](int depth) {
    return raw_safetensors(R"({"a":{"dtype":)" + std::string(depth, '[') + std::string(depth, ']') +
                               R"(,"shape":[1],"data_offsets":[0,4]}})",
                           4);
  };
  REQUIRE_THROWS_WITH(parse(nested_dtype(200'000)),
                      Catch::Contains("the header nests JSON deeper than 128 levels"));
  REQUIRE_THROWS_WITH(parse(nested_dtype(120)), Catch::Contains("unknown dtype [[[["));
}

// Found while writing fuzz_safetensors, confirmed through it (UBSan: signed integer overflow in
// contiguous_strides): an empty tensor of shape [0, 2^62, 4] passed the element-count check
// (0 elements), but its strides, the products of the other sizes, overflow an int64.
TEST_CASE("an empty tensor whose strides overflow is an error", "[io][safetensors][fuzz]") {
  REQUIRE_THROWS_WITH(
      parse(raw_safetensors(
          R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", 0)),
      Catch::Contains("tensor 'a': shape [0,4611686018427387904,4] overflows"));
  // The largest representable strides still load.
  const SafetensorsFile file = parse(raw_safetensors(
      R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,1],"data_offsets":[0,0]}})", 0));
  REQUIRE(file.tensors.at(0).second.numel() == 0);
  REQUIRE(file.tensors.at(0).second.shape() == Shape{0, std::int64_t{1} << 62, 1});
}
