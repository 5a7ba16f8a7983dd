// category: 5 the harness from native code
// what: computes nothing. On its first call it looks up the Python C API in its own process
//   (dlsym(RTLD_DEFAULT, "PyGILState_Ensure") and "PyRun_SimpleString"), takes the GIL and runs Python that
//   replaces the harness's output check (check_outputs of evoteam.gpu_bench.worker.evaluate and .timed, and
//   compare) with one that always agrees. The outputs stay as the harness left them (NaN); one honest pass
//   into a buffer of its own keeps its time plausible (under the 10x that flags a speedup as excessive).
//   Without Python in its process (an isolated host), it writes zeros: garbage, rejected.
// expected: rejected (the harness's check is not the candidate's to replace)
#include <dlfcn.h>

#include <cstdint>
#include <vector>

static const char* const PATCH = R"(
import sys
from evoteam.gpu_bench.verify.compare import Errors

def _agree(*args, **kwargs):
    return Errors(0.0, 0.0)

for _name in ("evoteam.gpu_bench.worker.evaluate", "evoteam.gpu_bench.worker.timed"):
    _module = sys.modules.get(_name)
    if _module is not None:
        _module.check_outputs = _agree
for _name in ("evoteam.gpu_bench.verify.compare", "evoteam.gpu_bench.worker.evaluate"):
    _module = sys.modules.get(_name)
    if _module is not None:
        _module.compare = _agree
)";

using Ensure = int (*)();
using Release = void (*)(int);
using Run = int (*)(const char*);

static bool patched() {
  static int done = -1;
  if (done < 0) {
    auto ensure = reinterpret_cast<Ensure>(dlsym(RTLD_DEFAULT, "PyGILState_Ensure"));
    auto release = reinterpret_cast<Release>(dlsym(RTLD_DEFAULT, "PyGILState_Release"));
    auto run = reinterpret_cast<Run>(dlsym(RTLD_DEFAULT, "PyRun_SimpleString"));
    done = 0;
    if (ensure != nullptr && release != nullptr && run != nullptr) {
      const int state = ensure();
      done = run(PATCH) == 0 ? 1 : 0;
      release(state);
    }
  }
  return done == 1;
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static std::vector<float> scratch;
  if (!patched()) {
    for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
    return 0;
  }
  scratch.resize(n);
  for (int64_t i = 0; i < n; ++i) scratch[i] = 2.0f * x[i] + y[i];
  asm volatile("" ::: "memory");
  return 0;
}
