// What this CPU and its operating system can run, read at run time from cpuid and xgetbv (not
// from the compiler's target): kiln's bf16 GEMM is compiled into every x86-64 build and taken only
// where the instructions exist, so one binary runs on CPUs with and without them.
#pragma once

#include <string>

namespace kiln {

// AVX2 with FMA (the x86-64-v3 arithmetic) and an OS that saves the 256-bit registers.
bool cpu_has_avx2_fma();

// AVX-512 F and an OS that saves the 512-bit registers: what code built for target("avx512f")
// needs before it runs.
bool cpu_has_avx512f();

// AVX-512 (F, BW, VL) with AVX512_BF16 (VDPBF16PS: two bf16 products summed into each float32
// lane), and an OS that saves the 512-bit registers (XCR0's opmask and ZMM state bits).
bool cpu_has_avx512_bf16();

// AMX tiles with bf16 (TDPBF16PS), as cpuid reports them; using them also needs the kernel's
// permission (arch_prctl ARCH_REQ_XCOMP_PERM). kiln has no AMX kernel: this names the CPU only.
bool cpu_has_amx_bf16();

// The bf16 and matrix instructions for summaries, e.g. "AVX512_BF16, no AMX".
std::string cpu_bf16_features();

}  // namespace kiln
