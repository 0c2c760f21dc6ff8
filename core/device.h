// Where a tensor's storage lives: the CPU, or CUDA device N. Parsed from "cpu", "cuda", "cuda:N".
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kiln {

struct Device {
  enum class Kind : unsigned char { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  // "cpu", "cuda" or "cuda:N"; anything else is a kiln::Error naming the text.
  static Device parse(std::string_view text);

  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// Number of usable CUDA devices: 0 in a build without CUDA, and 0 when the driver answers with
// any error (machines without a GPU). Initialises CUDA on first use only.
int cuda_device_count();
// The name the driver gives CUDA device `index` ("NVIDIA H100 80GB HBM3"); a kiln::Error when
// there is no such device.
std::string cuda_device_name(int index);

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Device> : fmt::formatter<std::string_view> {
  auto format(const kiln::Device& device, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(device.str(), ctx);
  }
};
