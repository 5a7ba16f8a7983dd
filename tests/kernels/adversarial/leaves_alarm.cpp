// category: 9 process state left behind
// what: honest (one pass), but on its first call it installs a SIGALRM handler that burns 0.5 ms and arms a
//   periodic 2 ms interval timer: whoever runs next in the same worker loses a quarter of its time to it.
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include <cstdint>

static void on_alarm(int) {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 500000L);
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool armed = false;
  if (!armed) {
    armed = true;
    signal(SIGALRM, on_alarm);
    itimerval every{};
    every.it_interval.tv_usec = 2000;
    every.it_value.tv_usec = 2000;
    setitimer(ITIMER_REAL, &every, nullptr);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
