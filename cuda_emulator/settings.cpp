// The emulator's environment variables (see emulator.h). A value it cannot read stops the
// process: a test run with a misspelt setting would otherwise check less than it claims.
#include "cuda_emulator/settings.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "cuda_emulator/report.h"

namespace kiln::emulator {

namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

void read_order(Settings& s) {
  const std::string v = variable("KILN_EMULATOR_ORDER");
  if (v.empty() || v == "forward") return;
  if (v == "reverse") {
    s.order = ThreadOrder::reverse;
  } else if (v == "check") {
    s.order = ThreadOrder::check;
  } else if (v == "shuffle" || v.rfind("shuffle:", 0) == 0) {
    s.order = ThreadOrder::shuffle;
    if (v.size() > 8) {
      char* end = nullptr;
      s.seed = std::strtoull(v.c_str() + 8, &end, 10);
      if (*end != '\0') fatal(fmt::format("KILN_EMULATOR_ORDER={}: the seed is not a number", v));
    }
  } else {
    fatal(fmt::format("KILN_EMULATOR_ORDER={}: expected forward, reverse, shuffle[:seed] or check",
                      v));
  }
}

void read_memory(Settings& s) {
  const std::string v = variable("KILN_EMULATOR_MEMORY");
  if (v.empty()) return;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  const std::string unit = end;
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (end == v.c_str() || shift < 0 || n > (~0ull >> shift))
    fatal(fmt::format("KILN_EMULATOR_MEMORY={}: expected bytes, optionally with K, M or G", v));
  s.memory_limit = static_cast<std::size_t>(n << shift);
}

void read_protection(Settings& s) {
  const std::string v = variable("KILN_EMULATOR_PROTECTION");
  if (v.empty() || v == "pkey") return;
  if (v != "mprotect")
    fatal(fmt::format("KILN_EMULATOR_PROTECTION={}: expected pkey or mprotect", v));
  s.protection_keys = false;
}

void read_devices(Settings& s) {
  const std::string v = variable("KILN_EMULATOR_DEVICES");
  if (v.empty()) return;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 0 || n > 8)
    fatal(fmt::format("KILN_EMULATOR_DEVICES={}: expected 0 to 8", v));
  s.devices = static_cast<int>(n);
}

}  // namespace

Settings& settings() {
  static Settings* s = [] {
    auto* read = new Settings;  // never destroyed: read by code that runs after main
    read_order(*read);
    read_memory(*read);
    read_protection(*read);
    read_devices(*read);
    return read;
  }();
  return *s;
}

}  // namespace kiln::emulator
