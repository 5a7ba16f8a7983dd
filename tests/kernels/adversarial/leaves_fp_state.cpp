// category: 9 process state left behind
// what: honest (one pass), but leaves the floating-point state changed for whoever runs next in the same
//   worker: rounding toward zero, and (x86) flush-to-zero and denormals-are-zero in MXCSR.
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <cfenv>
#include <cstdint>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  std::fesetround(FE_TOWARDZERO);
#if defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) and DAZ (bit 6)
#endif
  return 0;
}
