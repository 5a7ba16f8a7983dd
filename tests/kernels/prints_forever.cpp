// Never returns: prints a line per element, round after round (a debugging printf left in a loop that does not end).
#include <cstdint>
#include <cstdio>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t round = 0;; ++round)
    for (int64_t i = 0; i < n; ++i) std::printf("debug round %ld i=%ld x=%f y=%f\n", (long)round, (long)i, x[i], y[i]);
  return 0;
}
