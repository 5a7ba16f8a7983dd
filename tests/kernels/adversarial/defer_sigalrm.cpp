// category: 3 deferred work
// what: arms a one-shot interval timer (ITIMER_REAL, 10 us) and returns at once; its SIGALRM handler (installed
//   by the call, put back as it was by the handler itself, so neither a handler nor a timer is left behind)
//   does the work (its slow, 20-pass honest work) in whatever harness code the signal interrupts on the
//   worker's main thread: after the clock stopped, and before that thread gets to read the outputs.
// workload: small-1000 (little work, done before the harness looks)
// expected: rejected or neutralized (outputs written after the call returned are refused, or the handler's
//   work is measured with the call)
#include <signal.h>
#include <sys/time.h>

#include <cstdint>

#define PASSES 20
#define DELAY_US 10

static const float* volatile job_x;
static const float* volatile job_y;
static float* volatile job_out;
static volatile int64_t job_n;
static volatile sig_atomic_t pending = 0;
static struct sigaction previous;

static void on_alarm(int) {
  if (pending) {
    const float* x = job_x;
    const float* y = job_y;
    float* out = job_out;
    for (int pass = 0; pass < PASSES; ++pass) {
      for (int64_t i = 0; i < job_n; ++i) out[i] = 2.0f * x[i] + y[i];
      asm volatile("" ::: "memory");
    }
    pending = 0;
  }
  sigaction(SIGALRM, &previous, nullptr);
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  while (pending) {  // the previous job's signal is still on its way
  }
  job_x = x;
  job_y = y;
  job_out = out;
  job_n = n;
  pending = 1;
  struct sigaction action = {};
  action.sa_handler = on_alarm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGALRM, &action, &previous);
  struct itimerval once = {};
  once.it_value.tv_usec = DELAY_US;
  setitimer(ITIMER_REAL, &once, nullptr);
  return 0;
}
