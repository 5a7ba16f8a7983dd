// category: 9 process state left behind
// what: honest (one pass), but pins the calling thread (the worker's main thread, which runs every kernel and
//   the reference) to the first CPU it may use: whoever runs next with threads of its own shares one core.
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <sched.h>

#include <cstdint>

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
        break;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
