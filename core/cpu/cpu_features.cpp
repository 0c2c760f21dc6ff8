#include "core/cpu/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln {

namespace {

#if defined(__x86_64__)
struct Registers {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid leaf and subleaf; all zero when the leaf is beyond the CPU's highest.
Registers cpuid(unsigned leaf, unsigned subleaf) {
  Registers r;
  if (static_cast<unsigned>(__get_cpuid_max(leaf & 0x80000000u, nullptr)) < leaf) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(unsigned value, int index) { return ((value >> index) & 1u) != 0; }

// XCR0, the register state the OS saves on a context switch (Intel SDM vol. 1, 13.3); 0 unless
// the OS enabled XSAVE (cpuid 1 ecx bit 27, OSXSAVE).
std::uint64_t enabled_state() {
  if (!bit(cpuid(1, 0).ecx, 27)) return 0;
  std::uint32_t low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (std::uint64_t{high} << 32) | low;
}

// XCR0 bits 1, 2 (SSE, AVX): the ymm registers.
constexpr std::uint64_t kYmmState = 0x6;
// XCR0 bits 1, 2 (SSE, AVX), 5, 6, 7 (opmask, the upper halves of zmm0-15, zmm16-31).
constexpr std::uint64_t kZmmState = 0xe6;

bool state_enabled(std::uint64_t state) { return (enabled_state() & state) == state; }

bool detect_avx2_fma() {
  return bit(cpuid(7, 0).ebx, 5) /* AVX2 */ && bit(cpuid(1, 0).ecx, 12) /* FMA */ &&
         state_enabled(kYmmState);
}

bool detect_avx512f() { return bit(cpuid(7, 0).ebx, 16) /* AVX512F */ && state_enabled(kZmmState); }

bool detect_avx512_bf16() {
  const Registers leaf7 = cpuid(7, 0), leaf7_1 = cpuid(7, 1);
  const bool instructions = bit(leaf7.ebx, 16) /* AVX512F */ && bit(leaf7.ebx, 30) /* BW */ &&
                            bit(leaf7.ebx, 31) /* VL */ && bit(leaf7_1.eax, 5) /* AVX512_BF16 */;
  return instructions && state_enabled(kZmmState);
}

bool detect_amx_bf16() {
  const Registers leaf7 = cpuid(7, 0);
  return bit(leaf7.edx, 22) /* AMX-BF16 */ && bit(leaf7.edx, 24) /* AMX-TILE */;
}
#else
bool detect_avx2_fma() { return false; }
bool detect_avx512f() { return false; }
bool detect_avx512_bf16() { return false; }
bool detect_amx_bf16() { return false; }
#endif

}  // namespace

bool cpu_has_avx2_fma() {
  static const bool has = detect_avx2_fma();
  return has;
}

bool cpu_has_avx512f() {
  static const bool has = detect_avx512f();
  return has;
}

bool cpu_has_avx512_bf16() {
  static const bool has = detect_avx512_bf16();
  return has;
}

bool cpu_has_amx_bf16() {
  static const bool has = detect_amx_bf16();
  return has;
}

std::string cpu_bf16_features() {
  return std::string(cpu_has_avx512_bf16() ? "AVX512_BF16" : "no AVX512_BF16") +
         (cpu_has_amx_bf16() ? ", AMX-BF16" : ", no AMX");
}

}  // namespace kiln
