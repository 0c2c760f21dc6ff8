// Files kiln writes by renaming a temporary file over them (checkpoints, the loss curve): the
// rename replaces whatever the path names. So the path must name a regular file or nothing yet;
// anything else there is refused before a byte is written. Run as root, `train_lm --save
// /dev/null` once replaced the device node with a checkpoint, and a save through a symbolic link
// replaced the link with a file.
//
//   check_output_file("runs/lm.safetensors", "--save");   // before training starts
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// A kiln::Error "<what> <path>: ..." when the path exists and is not a regular file (a device, a
// FIFO, a socket, a folder or a symbolic link), or when its folder exists and is not a folder.
void check_output_file(const std::string& path, std::string_view what);

}  // namespace kiln
