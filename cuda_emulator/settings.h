// The emulator's settings, read from the environment at the first CUDA call (see emulator.h);
// tests change some of them through emulator.h's functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_emulator/emulator.h"

namespace kiln::emulator {

struct Settings {
  ThreadOrder order = ThreadOrder::forward;         // KILN_EMULATOR_ORDER
  std::uint64_t seed = 0;                           // of shuffle:<seed>
  std::size_t memory_limit = std::size_t{8} << 30;  // KILN_EMULATOR_MEMORY
  bool protection_keys = true;                      // KILN_EMULATOR_PROTECTION=pkey|mprotect
  int devices = 1;                                  // KILN_EMULATOR_DEVICES
};

Settings& settings();

}  // namespace kiln::emulator
