// category: 9 process state left behind
// what: honest (one pass), but lowers the scheduling priority of the calling thread (the worker's main
//   thread) to nice 19: on a busy machine whoever runs next in the same worker gets the CPU last.
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <sys/resource.h>

#include <cstdint>

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  setpriority(PRIO_PROCESS, 0, 19);
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
