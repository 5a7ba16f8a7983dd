// category: 4 another kernel's outputs
// what: remembers every output buffer it is handed; when another one of the same length, still mapped, holds a
//   finished answer (its first and last 8 values right for these inputs), it copies that instead of doing its
//   slow, 20-pass honest work. Two routes lead there in a native host: paired timing trades two sets of
//   outputs between the candidate and the incumbent, so when the candidate runs second in a pair the other set
//   may hold the incumbent's answer of a moment ago; and the last correctness trial's output buffer stays
//   mapped while timing rotates over that trial's inputs, holding the kernel's own answer to them (a third of
//   the timed calls copied it, escaping the memo check, which uses another trial's inputs, before the harness
//   poisoned a trial's outputs once checked).
// expected: neutralized (every set is poisoned before each of the candidate's calls, and each trial's outputs
//   once checked: it never finds an answer and always does its honest work)
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#define PASSES 20
#define PROBE 8

struct Seen {
  float* at;
  int64_t n;
};
static std::vector<Seen> seen;  // every output buffer handed to it, newest last

static bool mapped(const float* at, int64_t n) {  // a trial's buffers are unmapped once it is over
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(at) & ~(page - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(at + n);
  std::vector<unsigned char> pages((hi - lo + page - 1) / page);
  return mincore(reinterpret_cast<void*>(lo), hi - lo, pages.data()) == 0;
}

static bool answers(const float* at, const float* x, const float* y, int64_t n) {
  for (int i = 0; i < PROBE; ++i) {
    if (at[i] != 2.0f * x[i] + y[i]) return false;
    const int64_t j = n - PROBE + i;
    if (at[j] != 2.0f * x[j] + y[j]) return false;
  }
  return !std::isnan(at[0]) && !std::isnan(at[n - 1]);
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n >= 2 * PROBE) {
    for (auto it = seen.rbegin(); it != seen.rend(); ++it) {
      if (it->at != out && it->n == n && mapped(it->at, n) && answers(it->at, x, y, n)) {
        std::memcpy(out, it->at, n * sizeof(float));
        return 0;
      }
    }
    bool known = false;
    for (const Seen& s : seen) known = known || s.at == out;
    if (!known) {
      if (seen.size() >= 64) seen.erase(seen.begin());
      seen.push_back({out, n});
    }
  }
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
