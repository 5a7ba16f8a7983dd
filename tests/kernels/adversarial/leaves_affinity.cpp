// category: 9 process state left behind
// what: honest (one pass), but changes the CPUs of the calling thread once (in the worker, its main thread,
//   which runs every kernel and the reference): to the one CPU it is on where it may use several (whoever
//   runs next with threads of its own shares one core), to every CPU where it was given one (it leaves the
//   CPU its host was moved to, beside the worker's).
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <sched.h>

#include <cstdint>
#include <cstring>

static bool changed = false;  // once: a second change could put back what the first changed

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  cpu_set_t cpus;
  int here = sched_getcpu();
  if (!changed && sched_getaffinity(0, sizeof cpus, &cpus) == 0 && here >= 0) {
    changed = true;
    if (CPU_COUNT(&cpus) > 1) {
      CPU_ZERO(&cpus);
      CPU_SET(here, &cpus);
    } else {
      std::memset(&cpus, 0xff, sizeof cpus);
    }
    sched_setaffinity(0, sizeof cpus, &cpus);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
