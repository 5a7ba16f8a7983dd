// category: 3 deferred work
// what: forks on every call; the child computes the outputs (its slow, 20-pass honest work) and exits, while
//   the parent returns at once. In the worker's address space the child's writes land in its own copy of the
//   memory, so the outputs stay poisoned; were the outputs shared memory (MAP_SHARED, as a host process for
//   isolated kernels may use), the child would fill them after the call returned.
// workload: small-1000 (like the other deferrals: little work, done before the harness looks)
// expected: rejected (the outputs are not written by the call; a child process outlives it)
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#define PASSES 20

static std::vector<pid_t> children;

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (auto it = children.begin(); it != children.end();) {  // reap the children of earlier calls
    it = waitpid(*it, nullptr, WNOHANG) != 0 ? children.erase(it) : it + 1;
  }
  const pid_t child = fork();
  if (child == 0) {
    for (int pass = 0; pass < PASSES; ++pass) {
      for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
      asm volatile("" ::: "memory");
    }
    _exit(0);
  }
  if (child > 0) children.push_back(child);
  return 0;
}
