// category: 9 process state left behind
// what: honest (one pass), but on its first call starts a detached thread that spins for 20 s: whoever runs
//   next in the same worker shares the machine's cores with it.
// expected: contained (its thread dies with its native host at the end of the request; the next candidate
//   is measured clean)
#include <chrono>
#include <cstdint>
#include <thread>

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool started = false;
  if (!started) {
    started = true;
    std::thread([] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
    }).detach();
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
