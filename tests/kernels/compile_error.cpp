#include <cstdint>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  return undefined_symbol + 1;
}
