// category: control
// what: honest but slow on purpose: computes out = 2x + y correctly, 20 times over (a compiler barrier keeps
//   every pass). The work every cheat of this folder does on the calls where it does not cheat, so a cheat's
//   speedup can be compared with what its honest work earns.
// expected: passed (no rejection; its speedup is the yardstick of "neutralized")
#include <cstdint>
#define PASSES 20
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");  // every pass is real work: the compiler may not merge the passes
  }
  return 0;
}
