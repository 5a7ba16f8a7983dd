// Segfaults on the medium workload only; correct elsewhere.
#include <cstdint>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n == 4096) {
    volatile float* p = nullptr;
    *p = 1.0f;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
