#include "core/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/io/crc32.h"
#include "core/io/input_file.h"
#include "core/io/output_file.h"
#include "core/io/utf8.h"

namespace kiln {

// Tensor bytes go to the file exactly as they lie in memory, and the format is little-endian.
static_assert(std::endian::native == std::endian::little,
              "kiln's safetensors I/O supports little-endian hosts only");

namespace {

// ordered_json keeps the header's keys in file order, so tensors tied at one offset (empty ones)
// load in the order the file lists them, and kiln's headers read in data order.
using json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
// JSON nesting the header may have (kiln's needs 3); the reference reader's parser, serde_json,
// also stops at 128. It bounds the recursion of json::dump, which error messages call.
constexpr int kMaxHeaderDepth = 128;
constexpr char kMetadataKey[] = "__metadata__";
constexpr char kChecksumKey[] = "checksum";

std::string_view format_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i64:
      return "I64";
    case DType::bf16:
      return "BF16";
  }
  return "?";
}

std::string errno_message() { return std::error_code(errno, std::generic_category()).message(); }

std::string hex8(std::uint32_t value) { return fmt::format("{:08x}", value); }

thread_local std::optional<testing::SaveFault> armed_fault;

// ---------------------------------------------------------------------------------------------
// Writing

// One save's file (core/output_file.h), with the fault a crash-safety test armed for it.
class SaveFile {
 public:
  explicit SaveFile(const std::string& target)
      : target_(target),
        file_(target, "save_safetensors:"),
        fault_(std::exchange(armed_fault, std::nullopt)) {}

  void write(const void* data, std::uint64_t size) {
    const auto* p = static_cast<const char*>(data);
    const std::uint64_t written = file_.bytes_written();
    if (fault_ && written + size >= fault_->after_bytes) {
      file_.write(p, fault_->after_bytes - written);
      fault_->crash();
      fail("save_safetensors: '{}': injected fault after {} bytes", target_, file_.bytes_written());
    }
    file_.write(p, size);
  }
  void commit() { file_.commit(); }

 private:
  std::string target_;
  AtomicFile file_;
  std::optional<testing::SaveFault> fault_;
};

// `text` with each byte that is not part of valid UTF-8 shown as \xNN, for error messages.
std::string escaped(std::string_view text) {
  std::string out;
  for (std::size_t bad; (bad = find_invalid_utf8(text)) != std::string_view::npos;) {
    out += text.substr(0, bad);
    out += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[bad]));
    text.remove_prefix(bad + 1);
  }
  return out += text;
}

// ---------------------------------------------------------------------------------------------
// Reading

// IEEE 754 binary16 to float32, exactly (every half is a float): subnormals normalised, infinities
// and NaNs kept.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: shift the mantissa up to its leading 1
    exponent = 113;
    while ((mantissa & 0x400u) == 0) mantissa <<= 1, --exponent;
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A tensor as the header describes it; begin/end are offsets into the data buffer.
struct Entry {
  std::string name;
  DType dtype = DType::f32;
  bool f16 = false;  // IEEE half in the file, widened to float32 (kiln has no f16 dtype)
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Where the reader's bytes come from: a file (load_safetensors) or memory (parse_safetensors).
class Input {
 public:
  virtual ~Input() = default;
  virtual std::uint64_t size() const = 0;
  // Reads the next `size` bytes into data.
  virtual void read(void* data, std::uint64_t size) = 0;
};

class InputFile final : public Input {
 public:
  InputFile(const std::string& path, const std::string& where) : where_(where) {
    OpenedFile file = open_input_file(path, "load_safetensors:");
    size_ = file.size();
    fd_ = file.release();
  }
  ~InputFile() override { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const override { return size_; }

  void read(void* data, std::uint64_t size) override {
    auto* p = static_cast<char*>(data);
    while (size > 0) {
      const std::size_t chunk = std::min<std::uint64_t>(size, 1u << 30);
      const ssize_t n = ::read(fd_, p, chunk);
      if (n < 0 && errno == EINTR) continue;
      KILN_CHECK(n >= 0, "{}reading failed: {}", where_, errno_message());
      KILN_CHECK(n > 0, "{}the file ended early (was it truncated while being read?)", where_);
      p += n, size -= static_cast<std::uint64_t>(n);
    }
  }

 private:
  std::string where_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

class InputBytes final : public Input {
 public:
  InputBytes(std::span<const std::byte> bytes, const std::string& where)
      : bytes_(bytes), where_(where) {}

  std::uint64_t size() const override { return bytes_.size(); }

  void read(void* data, std::uint64_t size) override {
    KILN_CHECK(size <= bytes_.size() - position_, "{}the bytes ended early", where_);
    if (size == 0) return;  // memcpy from a null span is undefined even for 0 bytes
    std::memcpy(data, bytes_.data() + position_, size);
    position_ += size;
  }

 private:
  std::span<const std::byte> bytes_;
  std::string where_;
  std::uint64_t position_ = 0;
};

// Parses the header, rejecting duplicate keys in any object (nlohmann keeps the last silently)
// and nesting deeper than kMaxHeaderDepth (at once: a 100 MB "[[[..." would take gigabytes).
json parse_header(const std::string& text, const std::string& where) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    KILN_CHECK(depth <= kMaxHeaderDepth, "{}the header nests JSON deeper than {} levels", where,
               kMaxHeaderDepth);
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && duplicate.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, note_keys);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    fail("{}the header is not valid JSON: {}", where, e.what());
  }
  KILN_CHECK(duplicate.empty(), "{}the header lists '{}' twice (duplicate name)", where, duplicate);
  return header;
}

Metadata parse_metadata(const json& value, const std::string& where) {
  Metadata metadata;
  if (value.is_null()) return metadata;  // the reference reader takes null as "no metadata"
  KILN_CHECK(value.is_object(), "{}__metadata__ is a JSON {}, not an object", where,
             value.type_name());
  for (const auto& [key, item] : value.items()) {
    KILN_CHECK(item.is_string(), "{}metadata value of '{}' is a JSON {}, not a string", where, key,
               item.type_name());
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

std::uint64_t unsigned_field(const json& value, std::string_view what, const std::string& name,
                             const std::string& where) {
  KILN_CHECK(value.is_number_unsigned(), "{}tensor '{}': {} {} is not a non-negative integer",
             where, name, what, value.dump());
  return value.get<std::uint64_t>();
}

Entry parse_entry(const std::string& name, const json& value, const std::string& where) {
  KILN_CHECK(!name.empty(), "{}a tensor has an empty name", where);
  KILN_CHECK(value.is_object(), "{}tensor '{}' is described by a JSON {}, not an object", where,
             name, value.type_name());
  for (const auto& [field, item] : value.items()) {
    KILN_CHECK(field == "dtype" || field == "shape" || field == "data_offsets",
               "{}tensor '{}' has an unexpected field '{}'", where, name, field);
  }
  KILN_CHECK(value.contains("dtype") && value.contains("shape") && value.contains("data_offsets"),
             "{}tensor '{}' needs the fields dtype, shape and data_offsets", where, name);

  Entry entry;
  entry.name = name;
  const json& dtype = value["dtype"];
  const std::string dtype_text = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();
  if (dtype_text == "F32") {
    entry.dtype = DType::f32;
  } else if (dtype_text == "F64") {
    entry.dtype = DType::f64;
  } else if (dtype_text == "I64") {
    entry.dtype = DType::i64;
  } else if (dtype_text == "BF16") {
    entry.dtype = DType::bf16;
  } else if (dtype_text == "F16") {
    entry.dtype = DType::f32;
    entry.f16 = true;
  } else {
    fail("{}tensor '{}': unknown dtype {} (kiln reads F32, F64, I64, BF16 and F16)", where, name,
         dtype.dump());
  }

  const json& shape = value["shape"];
  KILN_CHECK(shape.is_array(), "{}tensor '{}': shape {} is not an array", where, name,
             shape.dump());
  // Element and byte counts overflow-checked like the reference reader's validate(). kiln also
  // needs the product of the sizes with 0 counted as 1 (the outermost stride times its size) to
  // fit an int64, so an empty tensor's strides are representable too; count <= extent.
  const std::string sized = fmt::format("{}tensor '{}': shape {}", where, name, shape.dump());
  std::int64_t count = 1;
  std::int64_t extent = 1;
  for (const json& size : shape) {
    const std::uint64_t n = unsigned_field(size, "shape entry", name, where);
    KILN_CHECK(n <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
               "{} overflows int64 (size {})", sized, n);
    const auto s = static_cast<std::int64_t>(n);
    extent = checked_mul(extent, std::max<std::int64_t>(s, 1), sized);
    count *= s;  // count <= extent
    entry.shape.push_back(s);
  }
  const std::uint64_t nbytes = checked_bytes(count, entry.f16 ? 2 : dtype_size(entry.dtype), sized);

  const json& offsets = value["data_offsets"];
  KILN_CHECK(offsets.is_array() && offsets.size() == 2,
             "{}tensor '{}': data_offsets {} is not a pair [begin, end]", where, name,
             offsets.dump());
  entry.begin = unsigned_field(offsets[0], "data_offsets entry", name, where);
  entry.end = unsigned_field(offsets[1], "data_offsets entry", name, where);
  KILN_CHECK(entry.begin <= entry.end, "{}tensor '{}': data_offsets [{}, {}] end before they begin",
             where, name, entry.begin, entry.end);
  KILN_CHECK(entry.end - entry.begin == nbytes,
             "{}tensor '{}': shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}",
             where, name, shape.dump(), dtype_text, nbytes, entry.begin, entry.end,
             entry.end - entry.begin);
  return entry;
}

// Sorts entries by offset and checks that they tile the data buffer [0, data_size) exactly.
void check_tiling(std::vector<Entry>& entries, std::uint64_t data_size, const std::string& where) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  std::uint64_t covered = 0;  // bytes [0, covered) belong to the tensors seen so far
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    KILN_CHECK(e.begin >= covered, "{}tensor '{}' (bytes [{}, {})) overlaps tensor '{}' ([{}, {}))",
               where, e.name, e.begin, e.end, previous->name, previous->begin, previous->end);
    KILN_CHECK(e.begin == covered || previous != nullptr,
               "{}the first tensor '{}' starts at byte {} of the data buffer, not 0 (a gap)", where,
               e.name, e.begin);
    KILN_CHECK(
        e.begin == covered,
        "{}a gap of {} bytes between tensor '{}' (ends at {}) and tensor '{}' (starts at {})",
        where, e.begin - covered, previous->name, covered, e.name, e.begin);
    covered = e.end;
    previous = &e;
  }
  KILN_CHECK(covered <= data_size,
             "{}the file is truncated: its tensors need {} bytes of data, but only {} follow the "
             "header",
             where, covered, data_size);
  KILN_CHECK(covered == data_size,
             "{}{} trailing bytes after the last tensor (the data buffer should be {} bytes)",
             where, data_size - covered, covered);
}

// One tensor's bytes as the file stores them.
struct StoredBytes {
  std::string_view name;
  const void* data;
  std::uint64_t size;
};

// kiln's checksum: the CRC-32 of every tensor's bytes as stored in the file (an F16 tensor's
// halves, not the floats they widen to), tensors in byte-wise order of their names (not of their
// data), so that a writer that orders the data otherwise (Python's safetensors sorts it by dtype,
// then name) keeps it valid.
std::uint32_t checksum_by_name(std::vector<StoredBytes> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::uint32_t checksum = 0;
  for (const StoredBytes& t : tensors)
    if (t.size > 0) checksum = crc32(t.data, t.size, checksum);
  return checksum;
}

std::uint32_t parse_checksum(const std::string& text, const std::string& where) {
  const bool hex = text.size() == 8 && std::all_of(text.begin(), text.end(), [](char c) {
                     return std::isxdigit(static_cast<unsigned char>(c));
                   });
  KILN_CHECK(hex, "{}checksum '{}' is not 8 hex digits", where, text);
  return static_cast<std::uint32_t>(std::stoul(text, nullptr, 16));
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  const std::string where = fmt::format("save_safetensors: '{}': ", path);
  // Everything that can be wrong with the arguments is caught before the file is touched (and
  // before nlohmann, which throws its own error on invalid UTF-8, sees any text).
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    KILN_CHECK(!name.empty(), "{}a tensor has an empty name", where);
    KILN_CHECK(find_invalid_utf8(name) == std::string_view::npos,
               "{}tensor name '{}' is not valid UTF-8", where, escaped(name));
    KILN_CHECK(name != kMetadataKey, "{}'{}' is reserved for the metadata, not a tensor name",
               where, name);
    KILN_CHECK(names.insert(name).second, "{}tensor name '{}' is used twice", where, name);
    KILN_CHECK(tensor.defined(), "{}tensor '{}' is undefined", where, name);
  }
  for (const auto& [key, value] : metadata) {
    KILN_CHECK(find_invalid_utf8(key) == std::string_view::npos,
               "{}metadata key '{}' is not valid UTF-8", where, escaped(key));
    const std::size_t bad = find_invalid_utf8(value);  // values can be long: name the byte
    KILN_CHECK(bad == std::string_view::npos,
               "{}the metadata value of '{}' is not valid UTF-8 (byte {})", where, key, bad);
    KILN_CHECK(key != kChecksumKey, "{}metadata key '{}' is reserved: save_safetensors writes it",
               where, key);
  }

  // Contiguous host copies, larger elements first (8, 4, then 2 bytes) so that every tensor is
  // aligned to its element size; tensors of one size keep the caller's order.
  struct Item {
    const std::string* name;
    Tensor host;
    std::uint64_t nbytes;
  };
  std::vector<Item> items;
  for (const std::size_t element_size : {8, 4, 2}) {
    for (const auto& [name, tensor] : tensors) {
      if (dtype_size(tensor.dtype()) != element_size) continue;
      const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
      items.push_back({&name, host, static_cast<std::uint64_t>(host.numel()) * element_size});
    }
  }

  std::vector<StoredBytes> by_name;
  for (const Item& item : items) by_name.push_back({*item.name, item.host.raw_data(), item.nbytes});
  const std::uint32_t checksum = checksum_by_name(by_name);
  Metadata all_metadata = metadata;
  all_metadata.emplace(kChecksumKey, hex8(checksum));

  json header = json::object();
  header[kMetadataKey] = json(all_metadata);
  std::uint64_t offset = 0;
  for (const Item& item : items) {
    header[*item.name] = {{"dtype", format_name(item.host.dtype())},
                          {"shape", item.host.shape()},
                          {"data_offsets", {offset, offset + item.nbytes}}};
    offset += item.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N a multiple of 8: the data is aligned

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  SaveFile file(path);
  file.write(length, sizeof(length));
  file.write(text.data(), text.size());
  for (const Item& item : items) {
    if (item.nbytes > 0) file.write(item.host.raw_data(), item.nbytes);
  }
  file.commit();
}

namespace {

// The reader proper, whatever the bytes' origin; `where` starts every error message.
SafetensorsFile read_safetensors(Input& file, const std::string& where) {
  KILN_CHECK(file.size() >= 8, "{}the file is {} bytes, shorter than the 8-byte header length",
             where, file.size());
  unsigned char length_bytes[8];
  file.read(length_bytes, sizeof(length_bytes));
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{length_bytes[i]} << (8 * i);
  KILN_CHECK(n <= kMaxHeaderBytes, "{}header length {} is over the {}-byte limit (corrupt file?)",
             where, n, kMaxHeaderBytes);
  KILN_CHECK(n <= file.size() - 8,
             "{}header length {} runs past the end of the file ({} bytes after the length)", where,
             n, file.size() - 8);

  std::string text(n, '\0');
  file.read(text.data(), n);
  KILN_CHECK(!text.empty() && text[0] == '{',
             "{}the header is not a JSON object: it must start with '{{'", where);
  const std::size_t bad = find_invalid_utf8(text);
  KILN_CHECK(bad == std::string_view::npos, "{}the header is not valid UTF-8 (byte {} of it)",
             where, bad);
  const json header = parse_header(text, where);

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      result.metadata = parse_metadata(value, where);
    } else {
      entries.push_back(parse_entry(key, value, where));
    }
  }
  check_tiling(entries, file.size() - 8 - n, where);

  std::optional<std::uint32_t> expected_checksum;
  if (const auto it = result.metadata.find(kChecksumKey); it != result.metadata.end()) {
    expected_checksum = parse_checksum(it->second, where);
    result.metadata.erase(it);
  }

  // The entries tile the buffer in this order, so the data is read front to back.
  std::uint32_t file_order_checksum = 0;  // how kiln computed it before the by-name order
  // The stored halves of F16 tensors, kept for the by-name checksum when there is one to check
  // (the tensors themselves hold the widened floats).
  std::vector<std::vector<std::uint16_t>> stored_halves(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    const std::uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0 && e.f16) {
      std::vector<std::uint16_t> halves(nbytes / 2);
      file.read(halves.data(), nbytes);
      file_order_checksum = crc32(halves.data(), nbytes, file_order_checksum);
      float* out = static_cast<float*>(t.raw_data());
      for (std::size_t k = 0; k < halves.size(); ++k) out[k] = half_to_float(halves[k]);
      if (expected_checksum) stored_halves[i] = std::move(halves);
    } else if (nbytes > 0) {
      file.read(t.raw_data(), nbytes);
      file_order_checksum = crc32(t.raw_data(), nbytes, file_order_checksum);
    }
    result.tensors.emplace_back(e.name, std::move(t));
  }
  if (expected_checksum && *expected_checksum != file_order_checksum) {
    std::vector<StoredBytes> by_name;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      by_name.push_back({e.name,
                         e.f16 ? static_cast<const void*>(stored_halves[i].data())
                               : result.tensors[i].second.raw_data(),
                         e.end - e.begin});
    }
    const std::uint32_t checksum = checksum_by_name(by_name);
    KILN_CHECK(*expected_checksum == checksum,
               "{}checksum mismatch: the header says {}, the data gives {} (tensors by name; {} "
               "in file order): the file is corrupt",
               where, hex8(*expected_checksum), hex8(checksum), hex8(file_order_checksum));
  }
  return result;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = fmt::format("load_safetensors: '{}': ", path);
  InputFile file(path, where);
  return read_safetensors(file, where);
}

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view source) {
  const std::string where = fmt::format("parse_safetensors: '{}': ", source);
  InputBytes input(bytes, where);
  return read_safetensors(input, where);
}

void testing::arm_save_fault(SaveFault fault) { armed_fault = std::move(fault); }

}  // namespace kiln
