// What every example program does the same way: turn kiln::Error into a message and an exit
// status, and read the --device flag.
//
//   int main(int argc, char** argv) {
//     return run_program("eval_ppl", [&] { ...; return 0; });
//   }
#pragma once

#include <functional>
#include <string_view>

#include "core/device.h"

namespace kiln {

// Runs body and returns its exit status; a kiln::Error (or any other exception) is printed to
// stderr as "<name>: error: <message>" and gives status 1, and so does a stdout that could not
// take everything printed to it (checked when body returns; SIGPIPE is ignored, so a closed pipe
// is such a write error).
int run_program(std::string_view name, const std::function<int()>& body);

// The device that --device names, checked to exist: a kiln::Error naming the flag otherwise
// (for CUDA: a build without CUDA, no device, or too few devices).
Device device_from_flag(std::string_view text);

}  // namespace kiln
