// category: 2 poison detection
// what: computes (with its deliberately slow, 20-pass honest work) only when out[0] holds the harness's poison
//   (NaN); otherwise it returns at once and leaves whatever the buffer holds. A harness that poisons only the
//   calls it checks would time nothing but early returns.
// expected: neutralized (every timed call finds its outputs poisoned, so every call does its honest work)
#include <cmath>
#include <cstdint>

#define PASSES 20

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n <= 0 || !std::isnan(out[0])) return 0;
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
