// The ISA check's negative control (scripts/isa_check.sh, docs/isa-check.md): one AVX-512
// instruction run without asking cpuid first, the mistake bench_ops's FMA peak once made. Under
// qemu's Haswell model (AVX2, no AVX-512) it must die of SIGILL; if it ran, the emulator would
// not catch an unguarded use in kiln either, and the check would prove nothing.
#include <immintrin.h>

#include <cstdio>

namespace {

__attribute__((target("avx512f"), noinline)) float doubled(float x) {
  __m512 v = _mm512_set1_ps(x);
  __asm__ volatile("" : "+v"(v));  // opaque: the add below is not folded away
  v = _mm512_add_ps(v, v);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return lanes[0];
}

}  // namespace

int main() {
  std::printf("planted_avx512: ran an AVX-512 add (%g): this CPU has AVX-512F\n", doubled(1.0f));
  return 0;
}
