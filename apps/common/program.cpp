#include "apps/common/program.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/error.h"

namespace kiln {

int run_program(std::string_view name, const std::function<int()>& body) {
  // A closed stdout (`program | head`) is a write error, never death by a signal.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const int status = body();
    // What a program prints is its result: a stdout that did not take all of it (a full disk,
    // /dev/full, a closed pipe or descriptor) fails the run rather than exiting 0 without it.
    const bool written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
    KILN_CHECK(written, "writing to stdout failed: {}", std::strerror(errno));
    return status;
  } catch (const Error& e) {
    fmt::print(stderr, "{}: error: {}\n", name, e.what());
  } catch (const std::system_error& e) {  // fmt::print's failed writes, among others
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
