#include <cstdint>
extern "C" int axpy(double alpha, const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(alpha) * x[i] + y[i];
  return 0;
}
