// <immintrin.h> for kiln's AVX-512 kernels, when the compiler targets AVX-512 (KILN_NATIVE on
// such a CPU); every user keeps a portable path for other targets.
#pragma once

#if defined(__AVX512F__)
// GCC 12.2 warns inside its own AVX-512 headers (_mm512_undefined_epi32, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
