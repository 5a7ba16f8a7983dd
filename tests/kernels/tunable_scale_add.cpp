// scale_add in blocks of BLOCK elements: a knob for the offline tuner's end-to-end test.
// BLOCK above 4096 does not compile, on purpose (a config the tuner must record as failed).
#include <cstdint>
#define BLOCK 256
static_assert(BLOCK <= 4096, "BLOCK is too large");
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t start = 0; start < n; start += BLOCK) {
    const int64_t end = start + BLOCK < n ? start + BLOCK : n;
    for (int64_t i = start; i < end; ++i) out[i] = 2.0f * x[i] + y[i];
  }
  return 0;
}
