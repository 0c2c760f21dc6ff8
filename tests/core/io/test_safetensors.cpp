// Safetensors files (core/safetensors.h): round trips, the byte layout the reference reader
// demands, argument errors, every kind of corrupt file, and tools/check_safetensors.py.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/crc32.h"
#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "tests/core/io/files.h"
#include "tests/harness/op_table.h"
#include "tests/harness/paths.h"

using namespace kiln;
using kiln::testing::Bytes;
using kiln::testing::raw_safetensors;
using kiln::testing::read_file;
using kiln::testing::ScratchDir;
using kiln::testing::write_file;

namespace {

// The bytes of a tensor's values in row-major order (compares NaN payloads and -0.0 exactly).
Bytes value_bytes(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const unsigned char*>(host.raw_data());
  return Bytes(p, p + host.numel() * static_cast<std::int64_t>(dtype_size(host.dtype())));
}

void require_same(const Tensor& loaded, const Tensor& saved) {
  REQUIRE(loaded.device() == Device::cpu());
  REQUIRE((loaded.numel() == 0 || loaded.is_contiguous()));  // empty: nothing to lay out
  REQUIRE(loaded.dtype() == saved.dtype());
  REQUIRE(loaded.shape() == saved.shape());
  REQUIRE(value_bytes(loaded) == value_bytes(saved));
}

const Tensor& find(const SafetensorsFile& file, const std::string& name) {
  const auto it = std::find_if(file.tensors.begin(), file.tensors.end(),
                               [&](const auto& named) { return named.first == name; });
  INFO("tensor " << name);
  REQUIRE(it != file.tensors.end());
  return it->second;
}

// A mix of dtypes, sizes and awkward values.
NamedTensors sample_tensors() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan_payload = std::bit_cast<float>(0x7FC01234u);
  return {
      {"embed.weight", from_vector<float>({1.5f, -0.0f, inf, -inf, nan_payload, 1e-45f,
                                           std::numeric_limits<float>::max(), 3.0f, -7.25f},
                                          {3, 3})},
      {"blocks.0.bias", from_vector<double>({0.1, -1e-310, 1e300}, {3})},
      {"ids", from_vector<std::int64_t>({std::numeric_limits<std::int64_t>::min(), -1, 0,
                                         std::numeric_limits<std::int64_t>::max()},
                                        {2, 2})},
      {"odd", from_vector<float>({1, 2, 3}, {3})},  // 12 bytes: the next F32 is only 4-aligned
      {"scale", full({}, 2.5)},                     // 0-dim
      {"step", full({}, 42.0, {.dtype = DType::i64})},
  };
}

}  // namespace

TEST_CASE("save then load is bit-exact for float32, float64 and int64", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  const NamedTensors tensors = sample_tensors();
  save_safetensors(path, tensors, {{"format", "kiln-1"}});
  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    require_same(find(file, name), t);
  }
}

TEST_CASE("0-dim and empty tensors round-trip", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("empty.safetensors");
  const NamedTensors tensors = {{"none", zeros({0})},
                                {"scalar", full({}, -3.0, {.dtype = DType::f64})},
                                {"hollow", zeros({2, 0, 3}, {.dtype = DType::f64})},
                                {"no_ids", zeros({0, 4}, {.dtype = DType::i64})}};
  save_safetensors(path, tensors);
  const SafetensorsFile file = load_safetensors(path);
  for (const auto& [name, t] : tensors) {
    INFO(name);
    require_same(find(file, name), t);
  }
  REQUIRE(find(file, "scalar").item<double>() == -3.0);

  save_safetensors(path, {});  // no tensors at all: a header and an empty data buffer
  const SafetensorsFile nothing = load_safetensors(path);
  REQUIRE(nothing.tensors.empty());
  REQUIRE(nothing.metadata.empty());
}

TEST_CASE("non-contiguous tensors are saved by value", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("views.safetensors");
  const Tensor base = arange(0.0, 24.0, 1.0, {.dtype = DType::f64}).view({4, 6});
  const Tensor transposed = base.t();                             // (6, 4)
  const Tensor strided = base.slice(1, 1, 6, 2);                  // (4, 3), every other column
  const Tensor expanded = arange(3).view({3, 1}).expand({3, 5});  // int64, stride 0
  REQUIRE_FALSE(transposed.is_contiguous());
  REQUIRE_FALSE(strided.is_contiguous());
  REQUIRE_FALSE(expanded.is_contiguous());
  save_safetensors(path, {{"t", transposed}, {"s", strided}, {"e", expanded}});
  const SafetensorsFile file = load_safetensors(path);
  require_same(find(file, "t"), transposed.contiguous());
  require_same(find(file, "s"), strided.contiguous());
  require_same(find(file, "e"), expanded.contiguous());
  REQUIRE(find(file, "t").at<double>({1, 0}) == 1.0);
  REQUIRE(find(file, "s").at<double>({1, 2}) == 11.0);
  REQUIRE(find(file, "e").at<std::int64_t>({2, 4}) == 2);
}

TEST_CASE("BF16 tensors save and load bit for bit, after the 4-byte dtypes", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("bf16.safetensors");
  // Every bf16 pattern (NaNs with payloads, infinities, subnormals, -0), and a transposed view.
  std::vector<bf16> patterns;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits)
    patterns.push_back(bf16{static_cast<std::uint16_t>(bits)});
  const Tensor all = from_vector(patterns, {256, 256});
  const Tensor half = from_vector<float>({1.0f / 3.0f, -2.0f, 1e-40f}, {3}).to(DType::bf16);
  const NamedTensors tensors = {{"all", all},
                                {"odd", from_vector<float>({1, 2, 3}, {3})},
                                {"third", half},
                                {"view", all.narrow(0, 1, 3).t()},
                                {"ids", arange(3, {.dtype = DType::i64})}};
  save_safetensors(path, tensors, {{"format", "kiln-1"}});
  const SafetensorsFile file = load_safetensors(path);
  require_same(find(file, "all"), all);
  require_same(find(file, "third"), half);
  require_same(find(file, "view"), all.narrow(0, 1, 3).t().contiguous());
  REQUIRE(find(file, "view").at<bf16>({5, 2}).bits == 3 * 256 + 5);
  std::vector<std::string> names;
  for (const auto& [name, t] : file.tensors) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"ids", "odd", "all", "third", "view"});

  // The header says BF16 with 2 bytes per element.
  const Bytes bytes = read_file(path);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | bytes[i];
  const auto header =
      nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + length));
  REQUIRE(header["all"]["dtype"] == "BF16");
  REQUIRE(header["all"]["data_offsets"] == nlohmann::json::array({36, 36 + 2 * 65536}));
  REQUIRE(header["view"]["shape"] == nlohmann::json::array({256, 3}));
}

TEST_CASE("tensors load in file order: 8-byte dtypes first, each size in the caller's order",
          "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("order.safetensors");
  save_safetensors(path, sample_tensors());
  std::vector<std::string> names;
  for (const auto& [name, t] : load_safetensors(path).tensors) names.push_back(name);
  REQUIRE(names ==
          std::vector<std::string>{"blocks.0.bias", "ids", "step", "embed.weight", "odd", "scale"});
}

TEST_CASE("the layout follows the reference reader: padded header, aligned tiled data, checksum",
          "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("layout.safetensors");
  bool saw_padding = false;
  // Names of growing length move the unpadded header length through every remainder mod 8.
  for (int extra = 0; extra < 8; ++extra) {
    NamedTensors tensors = sample_tensors();
    tensors.emplace_back(std::string(1 + extra, 'x'), ones({5}));
    save_safetensors(path, tensors, {{"format", "kiln-1"}, {"step", "7"}});
    const Bytes bytes = read_file(path);
    INFO("extra " << extra << ", file of " << bytes.size() << " bytes");
    REQUIRE(bytes.size() >= 8);
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[i]} << (8 * i);
    REQUIRE((8 + n) % 8 == 0);
    REQUIRE(8 + n <= bytes.size());
    const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
    REQUIRE(header.front() == '{');
    const std::size_t last = header.find_last_not_of(' ');
    REQUIRE(header[last] == '}');
    REQUIRE(header.size() - 1 - last < 8);  // padding only as much as alignment needs
    saw_padding = saw_padding || last + 1 < header.size();

    const auto json = nlohmann::ordered_json::parse(header);
    REQUIRE(json.at("__metadata__").at("format") == "kiln-1");
    REQUIRE(json.at("__metadata__").at("step") == "7");
    std::uint64_t covered = 0;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_name;
    for (const auto& [name, info] : json.items()) {  // kiln writes the header in data order
      if (name == "__metadata__") continue;
      const std::uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
      const std::string dtype = info.at("dtype");
      const std::uint64_t element = dtype == "F32" ? 4 : 8;
      INFO(name << " " << dtype << " [" << begin << ", " << end << ")");
      REQUIRE(begin == covered);
      REQUIRE(begin % element == 0);
      covered = end;
      by_name[name] = {begin, end};
    }
    REQUIRE(8 + n + covered == bytes.size());  // no trailing bytes
    // The checksum: CRC-32 of the tensors' bytes in the order of their names.
    std::uint32_t crc = 0;
    for (const auto& [name, range] : by_name)
      crc = crc32(bytes.data() + 8 + n + range.first, range.second - range.first, crc);
    const std::string checksum = json.at("__metadata__").at("checksum");
    REQUIRE(checksum == fmt::format("{:08x}", crc));
  }
  REQUIRE(saw_padding);
}

TEST_CASE("metadata round-trips, and the checksum is verified and left out", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("meta.safetensors");
  const Metadata metadata = {{"format", "kiln-1"},
                             {"config", R"({"d_model": 64, "heads": 4, "name": "tiny \"lm\""})"},
                             {"vocab", "<eos>\nthe\ncafé\n日本\n<unk>"},
                             {"step", "1200"},
                             {"empty", ""},
                             {"git", "2651299"}};
  save_safetensors(path, {{"w", ones({2})}}, metadata);
  REQUIRE(load_safetensors(path).metadata == metadata);
}

TEST_CASE("save rejects bad names and metadata and leaves the existing file alone",
          "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("keep.safetensors");
  save_safetensors(path, {{"w", ones({2})}}, {{"step", "1"}});
  const Bytes before = read_file(path);
  const Tensor t = ones({1});
  const std::string bad_utf8 = "caf\xC3";  // a truncated two-byte sequence
  struct Case {
    NamedTensors tensors;
    Metadata metadata;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"", t}}, {}, "empty name"},
      {{{"a", t}, {"a", t}}, {}, "'a' is used twice"},
      {{{"__metadata__", t}}, {}, "reserved"},
      {{{bad_utf8, t}}, {}, "tensor name 'caf\\xC3' is not valid UTF-8"},
      {{{"a", Tensor()}}, {}, "'a' is undefined"},
      {{{"a", t}}, {{bad_utf8, "x"}}, "metadata key 'caf\\xC3' is not valid UTF-8"},
      {{{"a", t}}, {{"vocab", "ok\n" + bad_utf8}}, "metadata value of 'vocab' is not valid UTF-8"},
      {{{"a", t}}, {{"checksum", "00000000"}}, "'checksum' is reserved"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    REQUIRE_THROWS_WITH(
        save_safetensors(path, c.tensors, c.metadata),
        Catch::Contains("save_safetensors") && Catch::Contains(path) && Catch::Contains(c.message));
  }
  REQUIRE(read_file(path) == before);
  REQUIRE(dir.list() == std::vector<std::string>{"keep.safetensors"});
  const std::string nowhere = dir.file("missing/sub/x.safetensors");
  REQUIRE_THROWS_WITH(save_safetensors(nowhere, {{"w", t}}),
                      Catch::Contains(nowhere) && Catch::Contains("temporary file"));
}

TEST_CASE("save replaces an existing file and leaves no temporary file", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"w", ones({3})}}, {{"step", "1"}});
  save_safetensors(path, {{"w", full({3}, 2.0)}, {"b", zeros({1})}}, {{"step", "2"}});
  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.metadata.at("step") == "2");
  REQUIRE(find(file, "w").to_vector<float>() == std::vector<float>{2, 2, 2});
  REQUIRE(dir.list() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("a file from elsewhere without checksum or metadata loads", "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("foreign.safetensors");
  // Keys in name order, not data order, as PyTorch's writer may list them.
  write_file(path, raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                   R"("b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})",
                                   16));
  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.metadata.empty());
  REQUIRE(file.tensors.size() == 2);
  REQUIRE(file.tensors[0].first == "b");
  REQUIRE(file.tensors[0].second.item<std::int64_t>() == 0x0706050403020100);
  REQUIRE(value_bytes(file.tensors[1].second) == Bytes{8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("an F16 file's checksum is over its stored halves, in name order", "[io][safetensors]") {
  // Found by review: the file-order CRC was over the halves but the by-name one over the widened
  // floats, so an F16 file whose data is not in name order was called corrupt.
  ScratchDir dir;
  const std::string path = dir.file("half.safetensors");
  // Data buffer bytes 0..7: "b" (halves 0x0100, 0x0302) first, then "a" (0x0504, 0x0706).
  const std::uint8_t a[4] = {4, 5, 6, 7}, b[4] = {0, 1, 2, 3};
  const std::uint32_t by_name = crc32(b, 4, crc32(a, 4));
  write_file(path, raw_safetensors(
                       fmt::format(R"({{"__metadata__":{{"checksum":"{:08x}"}},)"
                                   R"("b":{{"dtype":"F16","shape":[2],"data_offsets":[0,4]}},)"
                                   R"("a":{{"dtype":"F16","shape":[2],"data_offsets":[4,8]}}}})",
                                   by_name),
                       8));
  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == 2);
  CHECK(file.tensors[0].first == "b");
  CHECK(file.tensors[1].second.dtype() == DType::f32);
  // A wrong checksum is still caught.
  write_file(path, raw_safetensors(
                       fmt::format(R"({{"__metadata__":{{"checksum":"{:08x}"}},)"
                                   R"("b":{{"dtype":"F16","shape":[2],"data_offsets":[0,4]}},)"
                                   R"("a":{{"dtype":"F16","shape":[2],"data_offsets":[4,8]}}}})",
                                   by_name ^ 1),
                       8));
  CHECK_THROWS_WITH(load_safetensors(path), Catch::Contains("checksum mismatch"));
}

namespace {

struct Corruption {
  std::string what;
  Bytes bytes;
  std::string message;  // what load_safetensors must say
};

// A JSON object from its members' texts ("key":value).
std::string object(std::initializer_list<std::string> members) {
  std::string text = "{";
  for (const std::string& member : members) {
    if (text.size() > 1) text += ',';
    text += member;
  }
  return text += '}';
}

// One corrupt file per rule of the format. Structural cases carry no checksum, so each trips
// exactly the rule it is named after.
std::vector<Corruption> corruptions(const std::string& scratch_file) {
  const auto tensor = [](const char* name, const char* dtype, const char* shape, int begin,
                         int end) {
    return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype,
                       shape, begin, end);
  };
  const std::string a = tensor("a", "F32", "[2]", 0, 8);
  Bytes past_end = raw_safetensors(object({a}), 8);
  past_end[0] = 0x00, past_end[1] = 0x10;  // the length field says 4096; the file is far shorter
  Bytes absurd;
  kiln::testing::append_u64(absurd, std::uint64_t{1} << 40);
  absurd.resize(64, ' ');
  std::vector<Corruption> cases = {
      {"shorter than the length field", {1, 2, 3}, "shorter than the 8-byte header length"},
      {"header length past the end", past_end, "header length 4096 runs past the end of the file"},
      {"absurd header length", absurd, "over the 100000000-byte limit"},
      {"header not an object", raw_safetensors("[1, 2]", 0), "must start with '{'"},
      {"leading space", raw_safetensors(fmt::format(" {}", object({a})), 8), "must start with '{'"},
      {"malformed JSON", raw_safetensors(R"({"a": {"dtype": "F32",)", 8), "not valid JSON"},
      {"invalid UTF-8", raw_safetensors("{\"\xFF\":1}", 0), "not valid UTF-8"},
      {"unknown dtype", raw_safetensors(object({tensor("a", "Q4", "[2]", 0, 8)}), 8),
       "unknown dtype \"Q4\""},
      {"BF16 byte length", raw_safetensors(object({tensor("a", "BF16", "[3]", 0, 8)}), 8),
       "shape [3] of BF16 needs 6 bytes, but data_offsets [0, 8] hold 8"},
      {"negative shape", raw_safetensors(object({tensor("a", "F32", "[-2]", 0, 8)}), 8),
       "shape entry -2 is not a non-negative integer"},
      {"fractional shape", raw_safetensors(object({tensor("a", "F32", "[2.0]", 0, 8)}), 8),
       "shape entry 2.0 is not a non-negative integer"},
      {"overflowing shape",
       raw_safetensors(object({tensor("a", "F32", "[4294967296,4294967296,4]", 0, 8)}), 8),
       "overflows"},
      {"shape vs offsets", raw_safetensors(object({tensor("a", "F32", "[3]", 0, 8)}), 8),
       "needs 12 bytes, but data_offsets [0, 8] hold 8"},
      {"reversed offsets", raw_safetensors(object({tensor("a", "F32", "[0]", 8, 0)}), 8),
       "end before they begin"},
      {"overlapping offsets", raw_safetensors(object({a, tensor("b", "F32", "[2]", 4, 12)}), 12),
       "tensor 'b' (bytes [4, 12)) overlaps tensor 'a' ([0, 8))"},
      {"gap between tensors", raw_safetensors(object({a, tensor("b", "F32", "[2]", 16, 24)}), 24),
       "a gap of 8 bytes between tensor 'a' (ends at 8) and tensor 'b'"},
      {"not starting at 0", raw_safetensors(object({tensor("a", "F32", "[2]", 8, 16)}), 16),
       "starts at byte 8 of the data buffer, not 0"},
      {"offsets past the end", raw_safetensors(object({tensor("a", "F32", "[4]", 0, 16)}), 12),
       "truncated: its tensors need 16 bytes of data, but only 12 follow"},
      {"trailing bytes", raw_safetensors(object({a}), 13), "5 trailing bytes"},
      {"non-string metadata", raw_safetensors(object({R"("__metadata__":{"step":5})", a}), 8),
       "metadata value of 'step' is a JSON number, not a string"},
      {"metadata not an object", raw_safetensors(object({R"("__metadata__":["x"])", a}), 8),
       "__metadata__ is a JSON array, not an object"},
      {"duplicate names", raw_safetensors(object({a, a}), 8), "lists 'a' twice"},
      {"empty name", raw_safetensors(object({tensor("", "F32", "[2]", 0, 8)}), 8), "empty name"},
      {"extra field",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
       "unexpected field 'x'"},
      {"missing field", raw_safetensors(R"({"a":{"dtype":"F32","shape":[2]}})", 8),
       "needs the fields dtype, shape and data_offsets"},
      {"checksum not hex", raw_safetensors(object({R"("__metadata__":{"checksum":"xyz"})", a}), 8),
       "checksum 'xyz' is not 8 hex digits"},
  };
  // Damage to a real kiln file.
  save_safetensors(scratch_file, sample_tensors(), {{"format", "kiln-1"}});
  const Bytes good = read_file(scratch_file);
  Bytes flipped = good;
  flipped[flipped.size() - 3] ^= 0x10;  // one bit of the last tensor's data
  cases.push_back({"flipped data bit", flipped, "checksum mismatch"});
  cases.push_back({"truncated kiln file", Bytes(good.begin(), good.end() - 4), "truncated"});
  Bytes longer = good;
  longer.push_back(0);
  cases.push_back({"kiln file with a trailing byte", longer, "1 trailing bytes"});
  return cases;
}

}  // namespace

TEST_CASE("loading rejects each kind of corrupt file, naming the file and the problem",
          "[io][safetensors]") {
  ScratchDir dir;
  const std::string path = dir.file("bad.safetensors");
  for (const Corruption& c : corruptions(dir.file("good.safetensors"))) {
    INFO(c.what);
    write_file(path, c.bytes);
    REQUIRE_THROWS_WITH(load_safetensors(path), Catch::Contains("load_safetensors: '" + path) &&
                                                    Catch::Contains(c.message));
  }
  const std::string missing = dir.file("missing.safetensors");
  REQUIRE_THROWS_WITH(load_safetensors(missing),
                      Catch::Contains(missing) && Catch::Contains("cannot open"));
}

TEST_CASE("tools/check_safetensors.py accepts kiln files and rejects corrupt ones",
          "[io][safetensors][python]") {
  const std::string tools = kiln::testing::source_path("tools");
  if (std::system("/usr/bin/python3 -c 'import zlib' > /dev/null 2>&1") != 0) {
    std::cout << "skipped: /usr/bin/python3 is not available" << std::endl;
    return;
  }
  ScratchDir dir;
  const std::string output = dir.file("output.txt");
  const auto check = [&](const std::string& file) {
    const std::string command = fmt::format(
        "/usr/bin/python3 '{}/check_safetensors.py' '{}' > '{}' 2>&1", tools, file, output);
    const int status = std::system(command.c_str());
    const Bytes text = read_file(output);
    UNSCOPED_INFO(std::string(text.begin(), text.end()));
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
  };

  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, sample_tensors(), {{"format", "kiln-1"}, {"step", "3"}});
  REQUIRE(check(path) == 0);
  const Bytes text = read_file(output);
  const std::string report(text.begin(), text.end());
  REQUIRE_THAT(report, Catch::Contains("embed.weight F32 [3, 3]") &&
                           Catch::Contains("scale F32 []") && Catch::Contains("ids I64 [2, 2]") &&
                           Catch::Contains("metadata: checksum, format, step") &&
                           Catch::Contains("6 tensors") && Catch::Contains("verified"));
  save_safetensors(path, {{"half", full({2, 3}, 0.5, {.dtype = DType::bf16})}, {"w", ones({2})}});
  REQUIRE(check(path) == 0);
  const Bytes bf16_text = read_file(output);
  REQUIRE_THAT(std::string(bf16_text.begin(), bf16_text.end()),
               Catch::Contains("w F32 [2]") && Catch::Contains("half BF16 [2, 3]") &&
                   Catch::Contains("verified"));

  for (const Corruption& c : corruptions(dir.file("good.safetensors"))) {
    INFO(c.what);
    write_file(path, c.bytes);
    REQUIRE(check(path) == 1);
    const Bytes err = read_file(output);
    REQUIRE_THAT(std::string(err.begin(), err.end()), Catch::Contains("INVALID"));
  }
}

TEST_CASE("tensors on a CUDA device are saved by value and load on the CPU", "[io][safetensors]") {
  if (!kiln::testing::cuda_available_or_skip()) return;
  ScratchDir dir;
  const std::string path = dir.file("cuda.safetensors");
  const Tensor host = arange(0.0, 12.0, 1.0).view({3, 4});
  save_safetensors(path, {{"w", host.to(Device::cuda())}, {"wt", host.to(Device::cuda()).t()}});
  const SafetensorsFile file = load_safetensors(path);
  require_same(find(file, "w"), host);
  require_same(find(file, "wt"), host.t().contiguous());
}
