// Helpers for the io tests: a scratch folder per test, whole-file reads and writes, raw
// safetensors files built byte by byte (to make corrupt ones), and kiln files rewritten as
// other writers write them.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io/crc32.h"

namespace kiln::testing {

using Bytes = std::vector<unsigned char>;

// A fresh empty folder under the system temp folder, removed with everything in it at the end.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("kiln-io-test-{}-{}", ::getpid(), counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // The names of the files in the folder, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void append_u64(Bytes& bytes, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

// A safetensors file from header text (space-padded to a multiple of 8 unless pad is false) and
// `data_bytes` bytes of data (0, 1, 2, ...).
inline Bytes raw_safetensors(std::string header, std::size_t data_bytes, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  Bytes bytes;
  append_u64(bytes, header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<unsigned char>(i));
  return bytes;
}

// The tensors of a safetensors file (kiln's or anyone's) laid out again in `data_order` (every
// name once), the header listing them in that order, the metadata kept as it is: what another
// writer does with the same tensors (Python's safetensors orders the data by dtype, then name).
inline Bytes relayout_safetensors(const Bytes& bytes, const std::vector<std::string>& data_order) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[i]} << (8 * i);
  const auto header = nlohmann::ordered_json::parse(bytes.begin() + 8, bytes.begin() + 8 + n);
  const auto data = bytes.begin() + 8 + static_cast<long>(n);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (header.contains("__metadata__")) out["__metadata__"] = header["__metadata__"];
  Bytes buffer;
  for (const std::string& name : data_order) {
    nlohmann::ordered_json info = header.at(name);
    const std::uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    info["data_offsets"] = {buffer.size(), buffer.size() + (end - begin)};
    buffer.insert(buffer.end(), data + static_cast<long>(begin), data + static_cast<long>(end));
    out[name] = info;
  }
  Bytes file = raw_safetensors(out.dump(), 0);
  file.insert(file.end(), buffer.begin(), buffer.end());
  return file;
}

// The file with its "checksum" replaced by the CRC-32 of the whole data buffer in file order, as
// kiln computed it before the checksum became independent of the order.
inline Bytes with_file_order_checksum(const Bytes& bytes) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[i]} << (8 * i);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  const std::size_t at = header.find("\"checksum\":\"") + 12;
  const std::uint32_t crc = crc32(bytes.data() + 8 + n, bytes.size() - 8 - n);
  header.replace(at, 8, fmt::format("{:08x}", crc));  // the same length: the layout stays
  Bytes out = bytes;
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}

}  // namespace kiln::testing
