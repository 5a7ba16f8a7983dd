// category: 3 deferred work
// what: does no work in the call: it takes all access away from the pages of `out` (mprotect) and installs
//   a SIGSEGV handler; the first touch of those pages (the harness reading the outputs to check them, or
//   poisoning them before the next call) faults, and the handler gives access back and computes the outputs
//   (its slow, 20-pass honest work) before the access goes on. The work happens exactly when someone looks,
//   never on the clock. The handler puts the previous SIGSEGV disposition back: no handler is left behind.
// workload: small-1000 (little work, done before the harness looks)
// expected: rejected or neutralized (outputs not written by the call are refused, or the handler's work is
//   measured with the call)
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#define PASSES 20

static const float* job_x;
static const float* job_y;
static float* job_out;
static int64_t job_n;
static char* guarded_lo;
static char* guarded_hi;
static std::atomic<int> pending{0};
static std::atomic_flag busy = ATOMIC_FLAG_INIT;
static struct sigaction previous;
static bool installed = false;

static void slow_scale_add() {
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < job_n; ++i) job_out[i] = 2.0f * job_x[i] + job_y[i];
    asm volatile("" ::: "memory");
  }
}

static void uninstall() {
  sigaction(SIGSEGV, &previous, nullptr);
  installed = false;
}

static void on_fault(int, siginfo_t* info, void*) {
  char* at = static_cast<char*>(info->si_addr);
  if (pending.load() && at >= guarded_lo && at < guarded_hi) {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
    if (pending.load()) {
      mprotect(guarded_lo, guarded_hi - guarded_lo, PROT_READ | PROT_WRITE);
      slow_scale_add();
      pending.store(0);
      uninstall();
    }
    busy.clear(std::memory_order_release);
    return;  // the access is retried, now on computed outputs
  }
  uninstall();  // not ours: the fault repeats under the previous disposition
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n <= 0) return 0;
  if (pending.load()) {  // called again before anyone looked (warm-up calls): settle the last job first
    mprotect(guarded_lo, guarded_hi - guarded_lo, PROT_READ | PROT_WRITE);
    slow_scale_add();
    pending.store(0);
  }
  job_x = x;
  job_y = y;
  job_out = out;
  job_n = n;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(out) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(out + n) + page - 1) & ~(page - 1);
  guarded_lo = reinterpret_cast<char*>(lo);
  guarded_hi = reinterpret_cast<char*>(hi);
  struct sigaction action = {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  if (!installed) sigaction(SIGSEGV, &action, &previous);
  installed = true;
  pending.store(1);
  mprotect(guarded_lo, hi - lo, PROT_NONE);
  return 0;
}
