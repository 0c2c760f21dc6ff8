// Safetensors files: kiln's checkpoint format, readable by Python's safetensors and PyTorch.
//
//   save_safetensors("model.safetensors", model.named_parameters(), {{"format", "kiln-1"}});
//   SafetensorsFile file = load_safetensors("model.safetensors");
//   for (const auto& [name, tensor] : file.tensors) ...      // CPU tensors, in file order
//   const std::string& format = file.metadata.at("format");
//
// Layout (docs/checkpoint-format.md has the details): an 8-byte little-endian header length N;
// N bytes of JSON starting with '{' and space-padded so that 8 + N is a multiple of 8; then the
// data buffer, in which each tensor's values lie little-endian in C order at its `data_offsets`
// [begin, end). The tensors tile the buffer from 0 without gaps or overlaps, and the file ends at
// the last tensor's last byte. kiln writes F32, F64, I64 and BF16 tensors, larger elements first
// (8, 4, then 2 bytes), so every tensor starts at a multiple of its element size (and the buffer
// at a multiple of 8).
//
// Metadata is a map of UTF-8 strings (the header's "__metadata__"). save_safetensors adds a
// "checksum" entry, the CRC-32 (zlib's, core/crc32.h) of the tensors' bytes as stored (an F16
// tensor's halves) taken in the byte-wise order of the tensors' names, as 8 lowercase hex digits:
// another writer that lays the same tensors out in another order (Python's safetensors does) and
// copies the metadata keeps it valid. load_safetensors verifies it when present, also accepting the
// CRC-32 of the data buffer in file order (what kiln wrote before), and leaves it out of the
// metadata it returns. A safetensors file from elsewhere usually has no checksum: it loads, with
// only the structural checks. A foreign "checksum" entry that is neither is an error.
//
// Saving is atomic: a temporary file next to `path` (`<path>.tmp.<pid>.<n>`) is written, fsynced
// and renamed over `path`, and the folder is fsynced, so `path` always holds either the previous
// file or the complete new one, even if the process dies mid-save. An error the writer can catch
// removes its temporary file; a process killed mid-save leaves it behind. kiln never reads such
// stale temporaries, and they may be deleted whenever no save to `path` is running.
//
// Loading trusts nothing: every problem (short file, header length, JSON, dtype, shape, offsets,
// trailing bytes, metadata types, duplicate names, checksum) is a kiln::Error naming the file and
// the problem. Only little-endian hosts are supported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// The header's "__metadata__": string keys to string values.
using Metadata = std::map<std::string, std::string>;

// Writes `tensors` (any device, any strides: their values are written) and `metadata` plus the
// "checksum" entry to `path`, atomically. Names must be non-empty, unique, valid UTF-8 and not
// "__metadata__"; metadata keys and values valid UTF-8, and no key may be "checksum".
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

struct SafetensorsFile {
  NamedTensors tensors;  // contiguous CPU tensors, in the order of their data in the file
  Metadata metadata;     // "__metadata__" without the verified "checksum"
};

// Reads and validates a safetensors file (F32, F64, I64 and BF16 tensors; F16 tensors, which other
// writers save, are widened to F32 exactly).
SafetensorsFile load_safetensors(const std::string& path);
// The same reader over bytes already in memory (`source` names them in errors): load_safetensors
// differs only in where the bytes come from, so the fuzz target that calls this tests its checks.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view source);

}  // namespace kiln

namespace kiln::testing {

// Fault injection for crash-safety tests. Arms the next save_safetensors call on this thread:
// once its temporary file holds `after_bytes` bytes (the whole file: after the last write, before
// fsync and rename), it calls `crash`. If `crash` returns, the save throws a kiln::Error, removes
// its temporary file and leaves `path` untouched. To imitate a killed writer, fork and let `crash`
// end the child (raise(SIGKILL) or _exit) so that no cleanup runs. A save whose file is shorter
// than `after_bytes` completes normally. Either way the fault is disarmed afterwards.
struct SaveFault {
  std::uint64_t after_bytes = 0;
  std::function<void()> crash;
};
void arm_save_fault(SaveFault fault);

}  // namespace kiln::testing
