// category: 3 deferred work
// what: hands each call's work to a thread of its own (started on the first call, detached) and returns as
//   soon as the thread has picked the job up: the timed region holds a handoff, the work (its slow, 20-pass
//   honest work) happens after the clock stopped, and is usually done before the harness reads the outputs.
// workload: small-1000 (little work, done before the harness looks)
// expected: rejected or neutralized (the host stops itself, every thread, after its answer, and the call ends
//   when that stop does: work done before it is on the clock, work left after it is frozen unfinished)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#define PASSES 20

namespace {
struct Job {
  const float* x;
  const float* y;
  float* out;
  int64_t n;
};

Job job;
std::atomic<uint64_t> posted{0}, taken{0}, done{0};
std::mutex mutex;
std::condition_variable wake;

void serve() {
  uint64_t seen = 0;
  auto last = std::chrono::steady_clock::now();
  for (;;) {
    while (posted.load(std::memory_order_acquire) == seen) {  // spin while busy, sleep once idle
      if (std::chrono::steady_clock::now() - last > std::chrono::milliseconds(50)) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait_for(lock, std::chrono::milliseconds(100), [&] { return posted.load() != seen; });
      }
      if (std::chrono::steady_clock::now() - last > std::chrono::seconds(30)) return;  // give up, eventually
    }
    seen = posted.load(std::memory_order_acquire);
    const Job j = job;
    taken.store(seen, std::memory_order_release);
    for (int pass = 0; pass < PASSES; ++pass) {
      for (int64_t i = 0; i < j.n; ++i) j.out[i] = 2.0f * j.x[i] + j.y[i];
      asm volatile("" ::: "memory");
    }
    done.store(seen, std::memory_order_release);
    last = std::chrono::steady_clock::now();
  }
}
}  // namespace

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool started = false;
  if (!started) {
    std::thread(serve).detach();
    started = true;
  }
  while (done.load(std::memory_order_acquire) != posted.load(std::memory_order_acquire)) {
    std::this_thread::yield();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    job = Job{x, y, out, n};
    posted.fetch_add(1, std::memory_order_acq_rel);
  }
  wake.notify_one();
  const uint64_t mine = posted.load(std::memory_order_acquire);
  while (taken.load(std::memory_order_acquire) != mine) {  // on a busy machine this wait is what gets timed
    std::this_thread::yield();
  }
  return 0;
}
