// scale_add whose starting version is slow on purpose: it computes the same result PASSES (64) times. A run's offline
// team (the knob PASSES is declared in the test repositories' evoteam.toml) finds PASSES 1, an improvement over
// the start that paired timing shows beyond doubt, so the run has a best to show, accept and export.
#include <cstdint>
#define BLOCK 256
#define PASSES 64
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t start = 0; start < n; start += BLOCK) {
      const int64_t end = start + BLOCK < n ? start + BLOCK : n;
      for (int64_t i = start; i < end; ++i) out[i] = 2.0f * x[i] + y[i];
    }
    asm volatile("" ::: "memory");  // every pass is real work: the compiler may not merge the passes
  }
  return 0;
}
