#include "examples/common/program.h"

#include <exception>
#include <string>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/error.h"

namespace kiln {

int run_program(std::string_view name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    fmt::print(stderr, "{}: error: {}\n", name, e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error: {}\n", name, e.what());
  }
  return 1;
}

Device device_from_flag(std::string_view text) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const Error& e) {
    fail("--device {}: {}", text, e.what());
  }
  if (device.is_cuda()) {
    const int count = cuda_device_count();
    KILN_CHECK(!build_info().cuda || device.index < count, "--device {}: {}", text,
               count == 0 ? std::string("no CUDA device is visible")
                          : fmt::format("only {} CUDA device(s) are visible", count));
    KILN_CHECK(build_info().cuda,
               "--device {}: this kiln was built without CUDA (reconfigure with "
               "-DKILN_CUDA=ON on a machine with the CUDA toolkit)",
               text);
  }
  return device;
}

}  // namespace kiln
