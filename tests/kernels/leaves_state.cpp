// Correct, but leaves the worker's process state changed for whoever runs next: a SIGALRM handler, the
// rounding mode set upward, flush-to-zero, and an environment variable. (The isolation tests expect the
// worker that ran it to be replaced.)
#include <cfenv>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
static void on_alarm(int) {}
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  signal(SIGALRM, on_alarm);
  std::fesetround(FE_UPWARD);
#if defined(__x86_64__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
#endif
  setenv("OMP_NUM_THREADS", "1", 1);
  return 0;
}
