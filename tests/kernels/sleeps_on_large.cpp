// Honest, but sleeps for a long time on large workloads.
#include <cstdint>
#include <unistd.h>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n > 10000) sleep(600);
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
