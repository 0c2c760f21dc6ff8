// <immintrin.h> for kiln's hand-vectorised kernels, when the compiler targets AVX2 or AVX-512
// (KILN_ARCH=native on such a CPU, x86-64-v3, x86-64-v4); every user keeps a portable path for
// other targets.
#pragma once

#if defined(__AVX2__) || defined(__AVX512F__)
// GCC 12.2 warns inside its own AVX-512 headers (_mm512_undefined_epi32, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
